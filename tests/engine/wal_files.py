"""Write-ahead logs made for tests: records that differ per LSN, segments of four frames
each, a byte flipped on disk (tests/engine/test_wal.py, tests/engine/test_wal_seals.py)."""

from __future__ import annotations

from pathlib import Path

from refimpl.engine.files import FileOps
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER_SIZE


class NoSync(FileOps):
    """Real files without fsync, where a test is about logic, not durability."""

    def fsync(self, fd: int) -> None:
        pass


NO_SYNC = NoSync()


def payload_of(lsn: int, size: int = 50) -> bytes:
    """A payload that differs per LSN, so a record in the wrong place is noticed."""
    seed = f"record {lsn}:".encode()
    return (seed * (size // len(seed) + 1))[:size]


def fill(log: WriteAheadLog, count: int, size: int = 50) -> list[bytes]:
    payloads = [payload_of(log.last_lsn + 1 + i, size) for i in range(count)]
    for payload in payloads:
        log.append(payload)
    log.wait_durable(log.last_lsn)
    return payloads


def segment_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.wal"))


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


# With 50-byte payloads a frame is 66 bytes; segment_bytes=200 puts 4 frames in each segment
# (198 bytes after three is still below 200).
FRAME = HEADER_SIZE + 50


def make_three_segments(directory: Path) -> list[bytes]:
    with WriteAheadLog(directory, segment_bytes=200, files=NO_SYNC) as log:
        payloads = fill(log, 12)
        assert [(s.first_lsn, s.last_lsn) for s in log.segments()] == [(1, 4), (5, 8), (9, 12)]
    return payloads

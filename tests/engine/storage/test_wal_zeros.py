"""Zeros written ahead of the log's end (refimpl/engine/storage/wal_zeros.py) and the
recovery rule they come with (wal_segments.scan_segments): zeros after the last valid frame
are the log's end; a frame a crash cut short over them is a torn tail; a whole frame that
fails its checksum, or a valid frame after a bad one, is damage as before."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import pytest

from refimpl.engine.files import FileOps
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_repair import inspect_log
from refimpl.engine.storage.wal_segments import HEADER_SIZE
from refimpl.engine.storage.wal_zeros import ZeroPlan
from refimpl.errors import CorruptLog
from tests.engine.wal_files import NO_SYNC, flip_byte, payload_of, segment_files

# Zeroing from the first byte, 8 KB a step when fewer than 4 KB are left, in the leader's
# thread: the steps come in a fixed order among the log's file operations.
INLINE = ZeroPlan(after=0, chunk=8192, ahead=4096, background=False)


def append_durably(log: WriteAheadLog, payloads: list[bytes]) -> None:
    for payload in payloads:
        log.wait_durable(log.append(payload))


def test_zeros_are_written_ahead_and_appends_land_in_them(tmp_path: Path) -> None:
    payloads = [payload_of(lsn, 100) for lsn in range(1, 31)]
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        append_durably(log, payloads[:1])
        path = segment_files(tmp_path)[0]
        frame = HEADER_SIZE + 100
        assert path.stat().st_size == frame + 8192  # zeros from the first frame's end
        append_durably(log, payloads[1:30])
        log_bytes = 30 * frame
        assert log.segments()[0].size == log_bytes  # the log's length, not the file's
        size = path.stat().st_size
        assert size - log_bytes >= INLINE.ahead
        assert path.read_bytes()[log_bytes:] == bytes(size - log_bytes)
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.recovery_messages == []
        assert [p for _, p in log.read(0)] == payloads
        assert log.segments()[0].size == log_bytes
    assert inspect_log(tmp_path).torn_tail is None


def test_without_zeros_the_file_is_the_log(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, zeros=None) as log:
        append_durably(log, [payload_of(lsn, 100) for lsn in range(1, 11)])
    assert segment_files(tmp_path)[0].stat().st_size == 10 * (HEADER_SIZE + 100)


def test_a_small_log_writes_no_zeros_and_none_past_the_segment(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "small", zeros=ZeroPlan(after=4096)) as log:
        append_durably(log, [payload_of(lsn, 100) for lsn in range(1, 11)])
    assert segment_files(tmp_path / "small")[0].stat().st_size == 10 * (HEADER_SIZE + 100)
    with WriteAheadLog(tmp_path / "bounded", segment_bytes=5000, zeros=INLINE) as log:
        append_durably(log, [payload_of(lsn, 100) for lsn in range(1, 60)])
        sizes = [path.stat().st_size for path in segment_files(tmp_path / "bounded")]
    assert len(sizes) > 1 and max(sizes) <= 5000 + HEADER_SIZE + 100


class SlowZeros(FileOps):
    """Zeros written slowly, so that the leader catches up with a step still writing."""

    def write_at(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        time.sleep(0.002)
        return super().write_at(fd, data, offset)

    def fsync(self, fd: int) -> None:
        pass


def test_a_step_in_the_background_never_writes_over_a_record(tmp_path: Path) -> None:
    # Records of up to 3 KB against steps of 4 KB started with 2 KB left: the leader keeps
    # overtaking the zeros, and every run that reaches a step still writing waits for it.
    plan = ZeroPlan(after=0, chunk=4096, ahead=2048, background=True)
    chooser = random.Random(7)
    payloads = [payload_of(lsn, chooser.randint(1, 3000)) for lsn in range(1, 301)]
    with WriteAheadLog(tmp_path, segment_bytes=100_000, files=SlowZeros(), zeros=plan) as log:
        append_durably(log, payloads)
        assert len(segment_files(tmp_path)) > 1
    with WriteAheadLog(tmp_path, segment_bytes=100_000, zeros=None) as log:
        assert log.recovery_messages == []
        assert [p for _, p in log.read(0)] == payloads


# --- the recovery rule over zeros ----------------------------------------------------------


def zeroed_log(directory: Path, sizes: list[int]) -> tuple[Path, list[bytes], list[int]]:
    """A log written with zeros ahead: its segment, payloads and each frame's offset."""
    payloads = [payload_of(lsn, size) for lsn, size in enumerate(sizes, start=1)]
    offsets = []
    with WriteAheadLog(directory, files=NO_SYNC, zeros=INLINE) as log:
        for payload in payloads:
            offsets.append(log.segments()[0].size if log.segments() else 0)
            log.wait_durable(log.append(payload))
    (path,) = segment_files(directory)
    return path, payloads, offsets


def zero_range(path: Path, start: int, end: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:end] = bytes(end - start)
    path.write_bytes(bytes(data))


def test_a_frame_whose_later_sectors_never_reached_the_disk_is_a_torn_tail(
    tmp_path: Path,
) -> None:
    path, payloads, offsets = zeroed_log(tmp_path, [100, 100, 2000])
    last = offsets[2]
    zero_range(path, (last // 512 + 2) * 512, last + HEADER_SIZE + 2000)  # its end unwritten
    size = path.stat().st_size
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.recovery_messages == [
            f"cut a torn tail of {size - last} bytes from {path} at offset {last} (after LSN 2)"
        ]
        assert [p for _, p in log.read(0)] == payloads[:2]


def test_a_frame_whose_first_sector_never_reached_the_disk_is_a_torn_tail(
    tmp_path: Path,
) -> None:
    path, payloads, offsets = zeroed_log(tmp_path, [100, 100, 2000])
    last = offsets[2]
    zero_range(path, last, (last // 512 + 1) * 512)  # its header's sector, not its payload's
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.last_lsn == 2 and len(log.recovery_messages) == 1


@pytest.mark.parametrize("where", ["payload", "checksum"])
def test_a_whole_last_frame_failing_its_checksum_before_zeros_is_damage(
    tmp_path: Path, where: str
) -> None:
    path, _, offsets = zeroed_log(tmp_path, [100, 100, 2000])
    flip_byte(path, offsets[2] + (HEADER_SIZE + 1500 if where == "payload" else 5))
    with pytest.raises(CorruptLog, match="checksum"):
        WriteAheadLog(tmp_path, zeros=INLINE)
    assert not inspect_log(tmp_path).ok


def test_a_valid_frame_after_an_unwritten_one_is_damage(tmp_path: Path) -> None:
    path, _, offsets = zeroed_log(tmp_path, [100, 1500, 100])
    zero_range(path, offsets[1] + HEADER_SIZE + 600, offsets[1] + HEADER_SIZE + 1300)
    with pytest.raises(CorruptLog, match="yet a valid frame of LSN 3 follows"):
        WriteAheadLog(tmp_path, zeros=INLINE)


class BrokenZeros(FileOps):
    """A step's write fails with what no disk raises: a bug's exception, not an OSError."""

    def write_at(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        raise ValueError("not a disk's error")

    def fsync(self, fd: int) -> None:
        pass


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_step_that_breaks_ends_the_zeros_and_holds_nothing_up(tmp_path: Path) -> None:
    plan = ZeroPlan(after=0, chunk=4096, ahead=2048, background=True)
    payloads = [payload_of(lsn, 1500) for lsn in range(1, 21)]
    done = threading.Event()

    def write() -> None:
        with WriteAheadLog(tmp_path, files=BrokenZeros(), zeros=plan) as log:
            append_durably(log, payloads)
        done.set()

    threading.Thread(target=write, daemon=True).start()
    assert done.wait(30), "a run or the close waited for a step that had ended"
    with WriteAheadLog(tmp_path, zeros=None) as log:
        assert [p for _, p in log.read(0)] == payloads

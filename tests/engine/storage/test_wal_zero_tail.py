"""The recovery rule over zeros written ahead of the log's end (wal_segments.scan_segments),
against what it must not take for a torn write: a whole acknowledged frame that is damaged.

A torn write over the zeros leaves one of its sectors all zeros; a frame written whole
does not, whatever its length field says (but for a payload holding a sector of zeros: the
rule's accepted limit). Valid frames after a torn frame in the last segment are of the same
unacknowledged write and are cut with it; anywhere else they make the bad frame damage.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from refimpl.engine.storage import backup
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER_SIZE
from refimpl.engine.storage.wal_zeros import ZeroPlan
from refimpl.errors import CorruptLog, StorageError
from tests.engine.wal_files import segment_files

_SECTOR = 512

# Zeros from the first byte, 64 KB a step, in the leader's thread.
INLINE = ZeroPlan(after=0, chunk=64 * 1024, ahead=32 * 1024, background=False)


def _acknowledged(folder: Path, payloads: list[bytes]) -> list[int]:
    """Each payload appended and waited for; the offsets of their frames."""
    offsets, offset = [], 0
    with WriteAheadLog(folder, zeros=INLINE) as log:
        for payload in payloads:
            log.wait_durable(log.append(payload))
            offsets.append(offset)
            offset += HEADER_SIZE + len(payload)
    return offsets


def _change(path: Path, offset: int, change: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + len(change)] = change
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("longer", [600, 2_000, 70_000, 1 << 30])
def test_the_last_frames_damaged_length_is_damage_not_a_torn_tail(
    tmp_path: Path, longer: int
) -> None:
    """A bit flip in the length field of the last acknowledged frame: its length reads past
    the zeros after it (or past the file's end), as a write cut short would leave it, yet
    its checksum matches its bytes."""
    payloads = [bytes([n]) * 100 + b"\x00\x00\x00" for n in range(1, 11)]
    offsets = _acknowledged(tmp_path, payloads)
    path = segment_files(tmp_path)[0]
    _change(path, offsets[-1], struct.pack("<I", len(payloads[-1]) + longer))
    with pytest.raises(CorruptLog, match="length field is damaged"):
        WriteAheadLog(tmp_path, zeros=INLINE).close()


def test_a_damaged_frame_with_a_sector_of_zeros_in_its_payload_is_cut_as_torn(
    tmp_path: Path,
) -> None:
    """The rule's accepted limit (spec/changes.md, "Damage and recovery"): a whole record
    whose payload holds a 512-byte sector of zeros (a BLOB of zeros) and that the medium
    later damages cannot be told from a write that never reached that sector, so it is cut
    as a torn tail, with the torn tail's message; PostgreSQL's recovery, too, ends its log
    at the first record that does not check."""
    payloads = [b"a" * 100, b"b" * 100 + bytes(2048) + b"c" * 100]
    offsets = _acknowledged(tmp_path, payloads)
    path = segment_files(tmp_path)[0]
    data = path.read_bytes()
    where = offsets[-1] + HEADER_SIZE + 5
    _change(path, where, bytes([data[where] ^ 1]))
    size = len(data)
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.recovery_messages == [
            f"cut a torn tail of {size - offsets[-1]} bytes from {path} at offset"
            f" {offsets[-1]} (after LSN 1)"
        ]
        assert [p for _, p in log.read(0)] == payloads[:1]


def _one_write_image(tmp_path: Path, payloads: list[bytes]) -> tuple[Path, bytes, bytes]:
    """LSN 1 (1,000 bytes) acknowledged alone, then `payloads` as LSN 2 on in one write
    (acknowledged in another log): the segment's path, as LSN 1 left it and with the write."""
    _acknowledged(tmp_path, [b"a" * 1000])  # LSN 1: 1,016 bytes, zeros after it
    path = segment_files(tmp_path)[0]
    durable = path.read_bytes()
    with WriteAheadLog(tmp_path / "live", zeros=INLINE) as live:
        for payload in [b"a" * 1000, *payloads]:
            live.append(payload)
        live.wait_durable(len(payloads) + 1)
    return path, durable, (tmp_path / "live" / path.name).read_bytes()


def test_a_power_loss_keeping_a_later_frame_of_the_same_write_opens(tmp_path: Path) -> None:
    """Writes into blocks already written reach the disk in any order: a power loss in one
    group commit's write can keep a later frame and not an earlier one's sector. Neither was
    acknowledged (the write's sync did not return), so both are cut, the message naming them."""
    path, durable, written = _one_write_image(tmp_path, [b"b" * 2000, b"c" * 100])
    image = bytearray(written)
    image[1016:1536] = durable[1016:1536]  # the first sector of LSN 2 never reached the disk
    path.write_bytes(bytes(image))
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.last_lsn == 1
        assert log.recovery_messages == [
            f"cut a torn tail of {len(image) - 1016} bytes from {path} at offset 1016"
            " (after LSN 1; LSN 2 to 3 dropped with it)"
        ]
    with WriteAheadLog(tmp_path, zeros=INLINE) as log:
        assert log.last_lsn == 1 and log.recovery_messages == []


def test_a_sector_of_zeros_in_a_later_record_is_not_the_bad_frames(tmp_path: Path) -> None:
    """Only the bad frame's own span is looked at: a flipped bit in LSN 2, every sector of
    which was written, stays damage though LSN 3 after it holds sectors of zeros."""
    path, _, written = _one_write_image(tmp_path, [b"b" * 2000, bytes(4096) + b"c"])
    image = bytearray(written)
    image[1016 + HEADER_SIZE + 700] ^= 1
    path.write_bytes(bytes(image))
    with pytest.raises(CorruptLog, match="checksum does not match.*yet a valid frame of LSN 3"):
        WriteAheadLog(tmp_path, zeros=INLINE)


def test_zeros_ending_a_bad_frame_in_the_sector_of_the_next_are_no_unwritten_sector(
    tmp_path: Path,
) -> None:
    """The sector holding the next valid frame's first bytes reached the disk (those bytes
    show it): the bad frame's zeros in it (its payload's last bytes) are written zeros, and
    a flipped bit elsewhere in it is damage."""
    # LSN 2 from 1,016 to 2,060: its payload's last 20 bytes are zeros, from 2,040, in the
    # sector 1,536 .. 2,048 and the next one, which LSN 3 begins in.
    path, _, written = _one_write_image(tmp_path, [b"b" * 1008 + bytes(20), b"c" * 100])
    image = bytearray(written)
    image[1016 + HEADER_SIZE + 5] ^= 1
    path.write_bytes(bytes(image))
    with pytest.raises(CorruptLog, match="yet a valid frame of LSN 3"):
        WriteAheadLog(tmp_path, zeros=INLINE)


def test_a_whole_frame_but_its_length_before_a_valid_one_is_damage(tmp_path: Path) -> None:
    """LSN 2, holding a sector of zeros, was written whole (its checksum matches its bytes up
    to LSN 3): a damaged length field, not a torn write, though the sector rule alone would
    cut it."""
    path, _, written = _one_write_image(tmp_path, [b"b" * 100 + bytes(2048), b"c" * 100])
    image = bytearray(written)
    image[1016:1020] = struct.pack("<I", 2148 + 7)
    path.write_bytes(bytes(image))
    with pytest.raises(CorruptLog, match="yet a valid frame of LSN 3"):
        WriteAheadLog(tmp_path, zeros=INLINE)


def test_an_unwritten_sector_before_a_later_segment_is_damage(tmp_path: Path) -> None:
    """The rule holds in the last segment only: a segment is synced whole before the next
    one is written, so a sector of zeros in a frame before a later segment was written
    zeros, not a write cut short, and the frames after it may have been acknowledged."""
    with WriteAheadLog(tmp_path, segment_bytes=2500, zeros=INLINE) as log:
        for payload in (b"a" * 1000, b"b" * 1500, b"c" * 100, b"d" * 100):
            log.wait_durable(log.append(payload))
    first = segment_files(tmp_path)[0]
    assert len(segment_files(tmp_path)) == 2
    _change(first, 1536, bytes(_SECTOR))  # a sector of LSN 2, from 1,016 to 2,532
    with pytest.raises(CorruptLog, match="not the last one"):
        WriteAheadLog(tmp_path, zeros=INLINE)


def test_a_backup_copying_while_commits_land_in_the_zeros(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "db"
    (source / "wal").mkdir(parents=True)
    with WriteAheadLog(source / "wal", zeros=INLINE) as log:
        for _ in range(3):
            log.wait_durable(log.append(b"a" * 1000))  # the log ends at 3,048: zeros after
        monkeypatch.setattr(backup, "_CHUNK", 4096)
        real_open = Path.open

        class Reader:
            """The segment's reader: commits land while the copy writes its first chunk."""

            def __init__(self, reader: Any) -> None:
                self._reader, self._reads = reader, 0

            def __enter__(self) -> Reader:
                return self

            def __exit__(self, *_: object) -> None:
                self._reader.close()

            def read(self, size: int = -1) -> bytes:
                chunk: bytes = self._reader.read(size)
                self._reads += 1
                if self._reads == 1:
                    for _ in range(4):
                        log.wait_durable(log.append(b"b" * 1000))
                return chunk

        def opened(path: Path, *args: Any, **kwargs: Any) -> Any:
            reader = real_open(path, *args, **kwargs)
            return Reader(reader) if path.suffix == ".wal" else reader

        monkeypatch.setattr(Path, "open", opened)
        try:
            copied = backup.copy_database(source, tmp_path / "backup" / "db", "db")
        except StorageError as exc:
            pytest.fail(str(exc))
    assert copied.lsn >= 3

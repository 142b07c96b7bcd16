"""Damaged data folders: what recovery cuts back, what it refuses, and what `check_data` says.

- A torn tail (the last segment cut inside its last record, or zero bytes after it) is cut
  back on open with a message, and every earlier commit is there.
- Damage (a whole frame that fails its checksum, the very last one included, or garbage after
  the last record; a flipped byte in a segment that is not the last; a segment cut short that
  is not the last; a missing segment) stops the open with CorruptLog naming the file, the
  frame's offset and the LSNs lost, and the failed open changes no byte.
- `refimpl check --cut-damaged-log` moves the damaged end aside and the folder opens again,
  without the LSNs the check named.
- A damaged or truncated checkpoint stops the open with CorruptCheckpoint naming the file.
- `check_data` reports each of these and changes no file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import refimpl
from refimpl.cli import main
from refimpl.engine.instance import check_data
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage.wal_segments import HEADER, HEADER_SIZE
from refimpl.errors import CorruptCheckpoint, CorruptLog, StorageError

SMALL = EngineOptions(segment_bytes=4096, wal_archive_bytes=1 << 30)


def wal_folder(data: Path) -> Path:
    return data / "demo" / "wal"


def segments(data: Path) -> list[Path]:
    return sorted(wal_folder(data).glob("*.wal"))


def frames(path: Path) -> list[tuple[int, int, int]]:
    """(offset, frame size, LSN) of every frame in a segment file (which must be whole)."""
    data = path.read_bytes()
    out = []
    pos = 0
    while pos < len(data):
        length, _crc, lsn = HEADER.unpack_from(data, pos)
        out.append((pos, HEADER_SIZE + length, lsn))
        pos += HEADER_SIZE + length
    assert pos == len(data)
    return out


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` and its bytes (the lock file aside)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x5A
    path.write_bytes(bytes(data))


def make_folder(data: Path, commits: int, options: EngineOptions = SMALL) -> None:
    """A table `t` with rows 1..commits, one commit each (LSN 1 creates the table)."""
    with refimpl.connect(data, options=options) as db:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, pad STRING)")
        for i in range(1, commits + 1):
            db.execute("INSERT INTO t VALUES (?, ?)", (i, f"row {i} " + "x" * 40))


def ids(db: refimpl.Connection) -> list[int]:
    return [row[0] for row in db.execute("SELECT id FROM t").rows]


def check(data: Path) -> tuple[str, bool]:
    """check_data, asserting that it changed no file."""
    before = snapshot(data)
    report, ok = check_data(data)
    assert snapshot(data) == before, "check_data changed a file"
    return report, ok


# -- a torn tail -----------------------------------------------------------------------------


@pytest.mark.parametrize("cut", ["in the header", "in the payload", "one byte short"])
def test_torn_tail_is_cut_back_with_a_message(tmp_path, cut):
    data = tmp_path / "data"
    make_folder(data, 200)
    assert len(segments(data)) >= 3
    last = segments(data)[-1]
    offset, size, lsn = frames(last)[-1]
    keep = {"in the header": 7, "in the payload": HEADER_SIZE + 9, "one byte short": size - 1}
    with open(last, "r+b") as file:
        file.truncate(offset + keep[cut])

    report, ok = check(data)
    assert ok, report  # a torn tail is not damage: opening cuts it back
    assert "torn tail" in report and str(last) in report, report

    with refimpl.connect(data, options=SMALL) as db:
        messages = db.instance.recovery_messages
        assert messages == [
            f"database 'demo': cut a torn tail of {keep[cut]} bytes from {last}"
            f" at offset {offset} (after LSN {lsn - 1})"
        ]
        assert ids(db) == list(range(1, 200))  # the cut commit (the last) is gone, no other
        db.execute("INSERT INTO t VALUES (200, 'again')")
    assert last.stat().st_size > offset
    with refimpl.connect(data, options=SMALL) as db:
        assert db.instance.recovery_messages == []
        assert ids(db) == list(range(1, 201))
    assert check(data)[1]


def test_zero_bytes_after_the_last_record_are_the_logs_end(tmp_path):
    # What the log writes ahead of its end (wal_zeros), or a file system extended the file
    # with: no record, so no torn tail; left for appends to land in.
    data = tmp_path / "data"
    make_folder(data, 20)
    last = segments(data)[-1]
    size = last.stat().st_size
    with open(last, "ab") as file:
        file.write(b"\x00" * 120)
    with refimpl.connect(data, options=SMALL) as db:
        assert db.instance.recovery_messages == []
        assert ids(db) == list(range(1, 21))
    assert last.stat().st_size == size + 120
    assert check(data)[1]


def test_garbage_after_the_last_record_is_damage(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 20)
    last = segments(data)[-1]
    size = last.stat().st_size
    with open(last, "ab") as file:
        file.write(b"\x00" * 100 + b"\x13\x37" * 10)  # a whole "frame", yet no valid one
    assert_open_refused(data, last, size)


# -- a flipped bit in the last frame: damage, reported, and moved aside on request -----------


def test_flipped_bit_in_the_last_frame_is_damage_until_cut_aside(tmp_path, capsys):
    data = tmp_path / "data"
    make_folder(data, 200)
    last = segments(data)[-1]
    offset, size, lsn = frames(last)[-1]
    assert lsn == 201  # the last acknowledged commit: INSERT of row 200
    data_bytes = bytearray(last.read_bytes())
    data_bytes[offset + HEADER_SIZE + 3] ^= 0x04  # one bit in the whole last frame
    last.write_bytes(bytes(data_bytes))

    error = assert_open_refused(data, last, offset)
    assert "LSN 201" in error.message and "refimpl check" in error.message
    assert "--cut-damaged-log" in error.message
    report, ok = check(data)
    assert "LSN 201 would be lost" in report, report

    assert main(["check", "--data", str(data), "--cut-damaged-log"]) == 0
    printed = capsys.readouterr().out
    assert f"cut {last} at offset {offset}" in printed and "LSN 201 lost" in printed, printed
    assert printed.rstrip().endswith("state: sound"), printed
    aside = data / "demo" / "damaged" / f"{last.name}.{offset}" / f"{last.name}.from-{offset}"
    assert aside.read_bytes() == bytes(data_bytes[offset:])  # kept for a closer look
    with refimpl.connect(data, options=SMALL) as db:
        assert ids(db) == list(range(1, 200))
        assert db.instance.recovery_messages == []
        db.execute("INSERT INTO t VALUES (200, 'again')")
    with refimpl.connect(data, options=SMALL) as db:
        assert ids(db) == list(range(1, 201))


def test_cut_damaged_log_leaves_a_sound_folder_alone(tmp_path, capsys):
    data = tmp_path / "data"
    make_folder(data, 5)
    before = snapshot(data)
    assert main(["check", "--data", str(data), "--cut-damaged-log"]) == 0
    assert "no damaged log, nothing was cut" in capsys.readouterr().out
    assert snapshot(data) == before


# -- damage that is not a tail ---------------------------------------------------------------


def assert_open_refused(data: Path, path: Path, offset: int) -> CorruptLog:
    before = snapshot(data)
    with pytest.raises(CorruptLog) as caught:
        refimpl.connect(data, options=SMALL)
    error = caught.value
    assert isinstance(error, StorageError)
    assert (error.path, error.offset) == (str(path), offset)
    assert str(path) in error.message and f"at offset {offset}" in error.message
    assert snapshot(data) == before, "a refused open changed a file"
    report, ok = check(data)
    assert not ok
    assert f"damage in {path} at offset {offset}" in report, report
    assert report.rstrip().endswith("state: DAMAGED")
    return error


def test_flipped_byte_in_a_middle_segment_stops_the_open(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 300)
    files = segments(data)
    assert len(files) >= 4
    middle = files[len(files) // 2]
    offset, size, _ = frames(middle)[3]
    flip(middle, offset + HEADER_SIZE + 5)
    assert_open_refused(data, middle, offset)


def test_flipped_length_field_in_a_middle_segment_stops_the_open(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 300)
    middle = segments(data)[1]
    offset, _, _ = frames(middle)[-1]  # the very last frame of a closed segment
    flip(middle, offset + 1)
    assert_open_refused(data, middle, offset)


def test_flipped_byte_in_the_last_segment_before_valid_records_stops_the_open(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 300)
    last = segments(data)[-1]
    records = frames(last)
    assert len(records) >= 3
    offset, _, _ = records[len(records) // 2 - 1]
    flip(last, offset + HEADER_SIZE + 1)
    assert_open_refused(data, last, offset)


def test_middle_segment_cut_short_stops_the_open(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 300)
    middle = segments(data)[1]
    offset, size, _ = frames(middle)[-1]
    with open(middle, "r+b") as file:
        file.truncate(offset + size // 2)
    assert_open_refused(data, middle, offset)


def test_missing_middle_segment_stops_the_open(tmp_path):
    data = tmp_path / "data"
    make_folder(data, 300)
    files = segments(data)
    files[1].unlink()
    assert_open_refused(data, files[2], 0)


# -- checkpoints -----------------------------------------------------------------------------


def checkpointed_folder(data: Path) -> Path:
    make_folder(data, 50)
    with refimpl.connect(data, options=SMALL) as db:
        db.execute("CHECKPOINT")
        db.execute("INSERT INTO t VALUES (51, 'after the checkpoint')")
    (file,) = sorted((data / "demo" / "checkpoints").glob("checkpoint-*.kdb"))
    return file


@pytest.mark.parametrize("damage", ["flipped byte", "truncated", "bad magic", "empty"])
def test_damaged_checkpoint_is_reported_and_refused(tmp_path, damage):
    data = tmp_path / "data"
    file = checkpointed_folder(data)
    size = file.stat().st_size
    if damage == "flipped byte":
        flip(file, size - 10)
    elif damage == "truncated":
        with open(file, "r+b") as handle:
            handle.truncate(size // 2)
    elif damage == "bad magic":
        flip(file, 0)
    else:
        file.write_bytes(b"")

    report, ok = check(data)
    assert not ok
    assert f"{file}" in report and "checkpoint:" in report, report
    assert report.rstrip().endswith("state: DAMAGED")

    before = snapshot(data)
    with pytest.raises(CorruptCheckpoint) as caught:
        refimpl.connect(data, options=SMALL)
    assert str(file) in caught.value.message
    assert snapshot(data) == before


def test_sound_folder_with_checkpoint_and_leftover_temporary_file(tmp_path):
    data = tmp_path / "data"
    file = checkpointed_folder(data)
    # A checkpoint write that died before its rename leaves a temporary file: not a checkpoint.
    leftover = file.with_name("checkpoint-99999999999999999999.kdb.tmp")
    leftover.write_bytes(b"KDBCKPT1 half written")
    report, ok = check(data)
    assert ok, report
    assert f"checkpoint: {file.name} at LSN" in report and "state: sound" in report
    with refimpl.connect(data, options=SMALL) as db:
        assert ids(db) == list(range(1, 52))
        assert db.instance.recovery_messages == []


@pytest.mark.parametrize("loss", ["last record", "every segment"])
def test_log_that_lost_records_a_checkpoint_holds_stops_the_open(tmp_path, loss):
    # A checkpoint is written only after its records are durable, so a log ending before it
    # lost its end (disk damage). Opening anyway would hand out the checkpoint's LSNs again
    # to new commits, which the next recovery (replaying only after the checkpoint) skips.
    data = tmp_path / "data"
    make_folder(data, 20)
    with refimpl.connect(data, options=SMALL) as db:
        assert db.execute("CHECKPOINT").message == "checkpoint written at LSN 21"
    if loss == "last record":
        last = segments(data)[-1]
        offset, _, _ = frames(last)[-1]
        with open(last, "r+b") as file:
            file.truncate(offset + 5)
    else:
        for segment in segments(data):
            segment.unlink()
    report, ok = check(data)
    assert not ok
    assert "gap: the log ends at LSN" in report and "before checkpoint 21" in report, report
    with pytest.raises(StorageError, match="checkpoint holds LSN 21"):
        refimpl.connect(data, options=SMALL)

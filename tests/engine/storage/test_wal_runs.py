"""WriteAheadLog.read_runs, recovery's read of the log: the records `read` gives, in runs,
checked as `read` checks them, but for checksums the open checked already.

Reads are made small (`RUN_BYTES`) so that runs are short and frames lie across two reads;
a record larger than a read must come whole all the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.engine.storage import wal_segments
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER_SIZE
from refimpl.errors import CorruptLog
from tests.engine.wal_files import NO_SYNC, fill, flip_byte, segment_files


def _records(log: WriteAheadLog, after: int) -> list[tuple[int, bytes]]:
    """What read_runs gives after `after`, as (LSN, payload) pairs; its runs must follow on."""
    records: list[tuple[int, bytes]] = []
    for first, payloads in log.read_runs(after):
        assert first == (records[-1][0] + 1 if records else after + 1)
        assert payloads
        records += [(first + i, bytes(payload)) for i, payload in enumerate(payloads)]
    return records


@pytest.mark.parametrize("read", [1, 70, 1000, 1 << 20])
def test_read_runs_gives_what_read_gives_from_any_position_across_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read: int
) -> None:
    monkeypatch.setattr(wal_segments, "RUN_BYTES", read)
    with WriteAheadLog(tmp_path, segment_bytes=3000, files=NO_SYNC) as log:
        for size in (0, 20, 5000, 20, 1):  # one record larger than a segment and a read
            fill(log, 40, size=size)
        assert len(log.segments()) > 3
        for after in (0, 1, 15, 16, 17, 40, 41, 100, 199, 200):
            assert _records(log, after) == list(log.read(after))
    with WriteAheadLog(tmp_path, segment_bytes=3000, files=NO_SYNC) as log:
        assert _records(log, 0) == list(log.read(0))  # what the open checked
        assert list(log.read_runs(log.last_lsn)) == []


def test_a_frame_damaged_after_the_open_is_found_and_named(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 10)
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 10)  # LSN 11 to 20: appended after the open, which never checked them
        frame = HEADER_SIZE + 50
        flip_byte(segment_files(tmp_path)[0], 14 * frame + HEADER_SIZE + 3)  # LSN 15's
        with pytest.raises(CorruptLog) as caught:
            _records(log, 0)
        assert caught.value.offset == 14 * frame
        assert "the frame of LSN 15 is damaged" in str(caught.value)
        assert [lsn for lsn, _ in _records(log, 15)] == list(range(16, 21))


def test_a_frame_out_of_sequence_or_a_file_cut_short_is_refused(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path, files=NO_SYNC) as log:
        fill(log, 5)
        path = segment_files(tmp_path)[0]
        frame = HEADER_SIZE + 50
        data = bytearray(path.read_bytes())
        data[3 * frame + 8] ^= 0x40  # LSN 4's LSN field
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptLog, match="where 4 belongs") as caught:
            _records(log, 0)
        assert caught.value.offset == 3 * frame
        path.write_bytes(bytes(data[: 2 * frame + 30]))  # cut inside LSN 3's frame
        with pytest.raises(CorruptLog, match="the file ends before LSN 3") as caught:
            _records(log, 0)
        assert caught.value.offset == 2 * frame

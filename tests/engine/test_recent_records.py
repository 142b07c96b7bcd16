"""Log records read ahead of a change stream's small pages (`recent_records.LogRecords`):
a page gives exactly what the log gives from its position, kept records or not; a position
the log no longer holds is Gone even when its records are kept; what is kept is bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.engine.features import recent_records
from refimpl.engine.features.recent_records import KEPT_BYTES, READ_AHEAD_BYTES, LogRecords
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.errors import Gone
from tests.engine.wal_files import NO_SYNC


def _fill(log: WriteAheadLog, count: int, size: int) -> list[bytes]:
    payloads = [bytes([n % 256]) * size + n.to_bytes(4, "big") for n in range(count)]
    for payload in payloads:
        log.append(payload)
    log.wait_durable(log.last_lsn)
    return payloads


def _page(log: WriteAheadLog, after: int, records: int) -> list[tuple[int, bytes]]:
    """What a page of `records` records after `after` reads, reading ahead as a full page
    does."""
    reader = LogRecords(log, after)
    taken: list[tuple[int, bytes]] = []
    try:
        for record in reader:
            taken.append(record)
            if len(taken) == records:
                break
        reader.read_ahead()
    finally:
        reader.close()
    return taken


def _kept(log: WriteAheadLog) -> dict[int, bytes]:
    return recent_records._of(log).payloads


def test_pages_read_ahead_give_what_the_log_gives(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "log", segment_bytes=64 * 1024, files=NO_SYNC) as log:
        payloads = _fill(log, 200, 1000)  # several segments: a read-ahead crosses them
        after, read = 0, []
        while page := _page(log, after, 3):
            read += page
            after = page[-1][0]
        assert read == list(enumerate(payloads, start=1))
        # The first page read ahead of itself; the records after it are kept, as the log
        # holds them, and the next page takes them from there.
        kept = _kept(log)
        assert kept and all(payloads[lsn - 1] == payload for lsn, payload in kept.items())
        assert sum(map(len, kept.values())) <= KEPT_BYTES


def test_a_page_that_reads_enough_reads_no_further(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "log", files=NO_SYNC) as log:
        _fill(log, 10, READ_AHEAD_BYTES)  # one record is a whole read-ahead
        assert _page(log, 0, 1) == list(log.read(0, limit_records=1))
        assert set(_kept(log)) <= {1}  # its own record at most, nothing past it


def test_a_position_the_log_no_longer_holds_is_gone_though_kept(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "log", segment_bytes=4096, files=NO_SYNC) as log:
        _fill(log, 40, 1000)
        _page(log, 1, 1)  # keeps LSN 3 and on
        assert 3 in _kept(log)
        log.remove_through(10)
        assert log.oldest_lsn > 3
        with pytest.raises(Gone):
            _page(log, 2, 1)
        after = log.oldest_lsn - 1
        assert _page(log, after, 2) == list(log.read(after, limit_records=2))


def test_kept_records_are_bounded_in_bytes(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path / "log", files=NO_SYNC) as log:
        count = 3 * KEPT_BYTES // 4000
        _fill(log, count, 4000)
        for after in range(0, count, 20):  # readers here and there, each reading ahead
            _page(log, after, 1)
        assert sum(map(len, _kept(log).values())) <= KEPT_BYTES
        assert _page(log, count - 5, 10) == list(log.read(count - 5))

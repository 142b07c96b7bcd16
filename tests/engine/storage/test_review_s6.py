"""Review of the storage and recovery changes: properties the reviewed code must keep.

The change stream's read-ahead (`features.recent_records.LogRecords`) must give exactly what
the log's own read gives at that moment, whatever pages read ahead before: the same records
in order, only durable ones, and `Gone` once the log no longer holds the position (records
removed after they were kept included).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from refimpl.engine.features import recent_records
from refimpl.engine.features.recent_records import LogRecords
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.errors import Gone
from tests.hypothesis_settings import OVER_FIXTURE

steps = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3)),  # durable records, of sizes
        st.tuples(st.just("pending"), st.integers(0, 0)),  # appended, not yet durable
        st.tuples(st.just("page"), st.integers(0, 40)),  # a page after some LSN
        st.tuples(st.just("remove"), st.integers(0, 40)),  # archive through some LSN
    ),
    min_size=1,
    max_size=40,
)


def _page(log: WriteAheadLog, after: int, size: int) -> list[tuple[int, bytes]] | str:
    """What a change-stream page of `size` records after `after` reads, reading ahead as a
    full page does; "gone" when the log says Gone."""
    records = LogRecords(log, after)
    got: list[tuple[int, bytes]] = []
    try:
        for record in records:
            got.append(record)
            if len(got) == size:
                break
        records.read_ahead()
    except Gone:
        return "gone"
    finally:
        records.close()
    return got


def _truth(log: WriteAheadLog, after: int, size: int) -> list[tuple[int, bytes]] | str:
    try:
        got: list[tuple[int, bytes]] = []
        for record in log.read(after):
            got.append(record)
            if len(got) == size:
                break
        return got
    except Gone:
        return "gone"


@settings(OVER_FIXTURE, max_examples=100)
@given(steps=steps, size=st.integers(1, 5))
# Records kept by a page, then the segments holding them archived: the next page there is Gone.
@example(steps=[("append", 1)] * 12 + [("page", 1), ("remove", 6), ("page", 1)], size=1)
# Pages at many positions: what is kept stays within its bound.
@example(steps=[("append", 3)] * 30 + [("page", n) for n in range(1, 30, 4)], size=1)
def test_read_ahead_pages_equal_the_logs_own_reads(
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    steps: list[tuple[str, int]],
    size: int,
) -> None:
    # Small read-aheads and a small bound, so that pages keep, reuse and evict records.
    monkeypatch.setattr(recent_records, "READ_AHEAD_BYTES", 300)
    monkeypatch.setattr(recent_records, "KEPT_BYTES", 700)
    folder: Path = tmp_path_factory.mktemp("log")
    with WriteAheadLog(folder, segment_bytes=256) as log:
        for kind, arg in steps:
            if kind == "append":
                log.wait_durable(log.append(bytes([log.last_lsn % 251]) * (1 + 40 * arg)))
            elif kind == "pending":
                log.append(b"not durable yet")
            elif kind == "page":
                after = min(arg, log.last_lsn)
                assert _page(log, after, size) == _truth(log, after, size)
                # and the same page again, now from what was kept
                assert _page(log, after, size) == _truth(log, after, size)
            else:
                log.remove_through(arg)
        kept = recent_records._of(log)
        assert kept.size <= recent_records.KEPT_BYTES or len(kept.payloads) <= 1
        assert kept.size == sum(map(len, kept.payloads.values()))

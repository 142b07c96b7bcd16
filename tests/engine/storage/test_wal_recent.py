"""The log's newest records in memory (`WriteAheadLog.recent`) are exactly what the log
reads once they are durable, or nothing: never a record missing, changed or out of order
(whatever the records' sizes and types, and however far back a reader asks)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_recent import KEPT_RECORDS, MAX_KEPT_PAYLOAD

# A record: its size, and whether the writer hands it as a bytearray (a bulk load's).
RECORDS = st.lists(
    st.tuples(
        st.sampled_from([1, 40, 300, MAX_KEPT_PAYLOAD, MAX_KEPT_PAYLOAD + 1]),
        st.booleans(),
    ),
    min_size=1,
    max_size=KEPT_RECORDS + 40,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.data())
def test_what_memory_gives_is_what_the_log_reads(records, data) -> None:
    with tempfile.TemporaryDirectory() as folder, WriteAheadLog(Path(folder)) as log:
        for at, (size, mutable) in enumerate(records):
            payload = bytes([at % 251]) * size
            log.append(bytearray(payload) if mutable else payload)
        last = log.last_lsn
        asked = [
            (after, data.draw(st.integers(after + 1, last), label="upto"))
            for after in data.draw(st.lists(st.integers(0, last - 1), max_size=5), label="after")
        ]
        kept = {(after, upto): log.recent.through(after, upto) for after, upto in asked}
        log.wait_durable(last)
        for (after, upto), found in kept.items():
            if found is None:
                continue
            read = [record for record in log.read(after) if record[0] <= upto]
            assert found == read
            assert upto - after <= KEPT_RECORDS


def test_the_newest_small_records_are_kept(tmp_path: Path) -> None:
    with WriteAheadLog(tmp_path) as log:
        for at in range(KEPT_RECORDS + 10):
            log.append(b"record %d" % at)
        last = log.last_lsn
        assert log.recent.through(last - 3, last) == [
            (lsn, b"record %d" % (lsn - 1)) for lsn in range(last - 2, last + 1)
        ]
        assert log.recent.through(last - KEPT_RECORDS - 1, last) is None  # one too old
        log.append(bytearray(b"a load's record"))
        assert log.recent.through(last, last + 1) is None  # may change: read from the log

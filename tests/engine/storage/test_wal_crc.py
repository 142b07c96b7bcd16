"""A frame's checksum from a checksum made before the LSN is known (a bulk load's record):
the same bytes on disk as the ordinary way, and a log that reopens and reads them back."""

from __future__ import annotations

import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import records
from refimpl.engine.storage.records import Entry
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_crc import KnownTail, combine, shift_operator
from refimpl.engine.storage.wal_segments import frame_header


@settings(max_examples=200, deadline=None)
@given(
    first=st.binary(max_size=300),
    second=st.binary(max_size=3000),
    seed=st.integers(0, 2**32 - 1),
)
def test_combine_is_the_checksum_of_the_two_parts_together(
    first: bytes, second: bytes, seed: int
) -> None:
    shift = shift_operator(len(second))
    assert combine(zlib.crc32(first, seed), shift, zlib.crc32(second)) == zlib.crc32(
        first + second, seed
    )


@settings(max_examples=200, deadline=None)
@given(
    payload=st.binary(max_size=2000),
    data=st.data(),
    lsn=st.integers(1, 2**63 - 1),
)
def test_a_known_tail_frames_as_the_whole_payload_does(
    payload: bytes, data: st.DataObject, lsn: int
) -> None:
    start = data.draw(st.integers(0, len(payload)))
    changed = bytearray(payload)
    known = KnownTail.of(changed, start)
    # The bytes before `start` may change after the tail was summed (a record's commit time).
    changed[:start] = data.draw(st.binary(min_size=start, max_size=start))
    assert frame_header(lsn, changed, known) == frame_header(lsn, bytes(changed))


def test_a_large_stamped_record_is_logged_uncopied_and_reads_back(tmp_path: Path) -> None:
    rows = [(n, f"row {n}" * 3) for n in range(40_000)]  # over a megabyte encoded
    record = records.encode_unstamped([Entry.upsert("t", ["id", "s"], rows, None)])
    known = KnownTail.of(record, records.STAMP_END)
    assert len(record) > 1 << 20
    with WriteAheadLog(tmp_path / "log") as log:
        before = log.append(b"small before")
        lsn = log.append(records.stamp(record, 1_700_000_000_000_000), known)
        after = log.append(b"small after")
        log.wait_durable(after)
        assert [before, lsn, after] == [1, 2, 3]
    with WriteAheadLog(tmp_path / "log") as reopened:  # every frame's checksum checked again
        read = list(reopened.read(0))
    assert read == [(1, b"small before"), (2, bytes(record)), (3, b"small after")]
    decoded = records.decode(2, read[1][1])
    assert decoded.committed_at == 1_700_000_000_000_000
    assert tuple(decoded.entries[0].payload[1][-1]) == (39_999, "row 39999" * 3)

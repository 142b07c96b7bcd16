"""Seals of sealed log segments: opening takes a sound segment from its seal without a walk,
and a seal never hides damage or changes what the log holds."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.storage import wal_seals
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import list_segments, scan_segments
from refimpl.errors import CorruptLog
from tests.engine.wal_files import FRAME, NO_SYNC, flip_byte, make_three_segments, segment_files
from tests.hypothesis_settings import OVER_FIXTURE


def seals(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("*" + wal_seals.SEAL_SUFFIX))


def test_sealed_segments_and_a_closed_log_open_from_their_seals(tmp_path: Path) -> None:
    payloads = make_three_segments(tmp_path)  # two segments filled, then the log closed
    assert seals(tmp_path) == [path.with_suffix(".seal").name for path in segment_files(tmp_path)]
    scan = scan_segments(list_segments(tmp_path), use_seals=True)
    assert scan.walked == []  # both sealed segments came from their seals
    assert [(s.first_lsn, s.last_lsn, s.size) for s in scan.segments] == [
        (1, 4, 4 * FRAME), (5, 8, 4 * FRAME), (9, 12, 4 * FRAME),
    ]  # fmt: skip
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        for after in range(13):  # seek hints from the seal's index, from every position
            assert list(log.read(after)) == list(enumerate(payloads[after:], start=after + 1))


def test_a_flipped_bit_under_a_seal_is_still_found_and_placed(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    middle = segment_files(tmp_path)[1]
    flip_byte(middle, FRAME + 20)
    with pytest.raises(CorruptLog) as caught:
        WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC)
    assert caught.value.path == str(middle) and caught.value.offset == FRAME


@pytest.mark.parametrize("damage", ["garbage", "torn", "missing", "other segment"])
def test_a_seal_that_cannot_be_trusted_costs_a_walk_and_is_written_anew(
    tmp_path: Path, damage: str
) -> None:
    payloads = make_three_segments(tmp_path)
    first, second, _ = segment_files(tmp_path)
    seal = wal_seals.seal_path(first)
    if damage == "garbage":
        seal.write_bytes(b"not a seal at all")
    elif damage == "torn":
        seal.write_bytes(seal.read_bytes()[:-3])
    elif damage == "missing":
        seal.unlink()
    else:  # a sound seal, but of another segment
        seal.write_bytes(wal_seals.seal_path(second).read_bytes())
    assert [s.first_lsn for s in scan_segments(list_segments(tmp_path), use_seals=True).walked] == [
        1
    ]
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        assert [payload for _, payload in log.read(0)] == payloads
    assert scan_segments(list_segments(tmp_path), use_seals=True).walked == []


def test_removing_segments_removes_their_seals(tmp_path: Path) -> None:
    make_three_segments(tmp_path)
    with WriteAheadLog(tmp_path, segment_bytes=200, files=NO_SYNC) as log:
        log.remove_through(8)
    assert [p.name for p in segment_files(tmp_path)] == ["00000000000000000009.wal"]
    assert seals(tmp_path) == ["00000000000000000009.seal"]  # the last one's, from the close


@settings(OVER_FIXTURE, max_examples=25)
@given(
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=40), reopen_every=st.integers(1, 10)
)
def test_opening_with_seals_equals_walking_every_frame(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], reopen_every: int
) -> None:
    directory = tmp_path_factory.mktemp("sealed")
    written: list[bytes] = []
    log = WriteAheadLog(directory, segment_bytes=150, files=NO_SYNC)
    for index, size in enumerate(sizes, start=1):
        payload = bytes([index % 251]) * size
        log.append(payload)
        written.append(payload)
        if index % reopen_every == 0:  # appends go on in the reopened last segment
            log.close()
            log = WriteAheadLog(directory, segment_bytes=150, files=NO_SYNC)
    log.close()
    sealed = scan_segments(list_segments(directory), use_seals=True)
    walked = scan_segments(list_segments(directory))
    assert sealed.damage is None and walked.damage is None and sealed.walked == []
    assert [s.info() for s in sealed.segments] == [s.info() for s in walked.segments]
    assert [(s.index_lsns, s.index_offsets, s.crc) for s in sealed.segments] == [
        (s.index_lsns, s.index_offsets, s.crc) for s in walked.segments
    ]
    with WriteAheadLog(directory, segment_bytes=150, files=NO_SYNC) as reopened:
        assert [payload for _, payload in reopened.read(0)] == written


def test_after_a_crash_only_what_follows_the_seal_is_walked(tmp_path: Path) -> None:
    payloads = make_three_segments(tmp_path)
    last = segment_files(tmp_path)[-1]
    log = WriteAheadLog(tmp_path, segment_bytes=400, files=NO_SYNC)  # room for more in it
    log.append(b"after the seal")
    log.wait_durable(log.last_lsn)
    with last.open("ab") as file:  # a crash in the middle of the next write
        file.write(b"\x07" * 5)
    del log  # no close: no new seal
    reopened = WriteAheadLog(tmp_path, segment_bytes=400, files=NO_SYNC)
    assert reopened.recovery_messages and "torn tail" in reopened.recovery_messages[0]
    assert [payload for _, payload in reopened.read(0)] == [*payloads, b"after the seal"]
    reopened.close()

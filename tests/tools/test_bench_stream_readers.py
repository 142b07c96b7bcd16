"""tools/bench/stream_readers.py: a plain stream read raw (its change events counted in each
read, whatever the reads cut) counts every event once and finds its last id, and the
exactly-once check tells a stream that lost an event, or got one twice, from the reference
(the benchmark itself is run by hand, not here)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def readers() -> Any:
    return load_bench("stream_readers")


def _event(lsn: int, ident: int) -> bytes:
    row = f'{{"table":"c","op":"upsert","row":{{"id":{ident},"sent":1.5}}}}'
    return f"id: {lsn}.0\nevent: change\ndata: {row}\n\n".encode()


def _chunked(parts: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n" % len(part) + part + b"\r\n" for part in parts)


def _stream(events: list[bytes], rng: random.Random) -> bytes:
    """The events in parts of a few each, a heartbeat now and then, chunked."""
    parts, at = [], 0
    while at < len(events):
        size = rng.randrange(1, 12)
        parts.append(b"".join(events[at : at + size]))
        at += size
        if rng.random() < 0.2:
            parts.append(b": heartbeat\n\n")
    return _chunked(parts)


def _read_raw(readers: Any, data: bytes, rng: random.Random, most: int) -> Any:
    tally = readers.Tally(False, readers.ROW_ID, readers.EVENT_ID)
    buffer = bytearray(1 << 16)
    at = 0
    while at < len(data):
        piece = data[at : at + rng.randrange(1, most)]
        buffer[: len(piece)] = piece
        tally.add_raw(buffer, len(piece))
        at += len(piece)
    return tally


@pytest.mark.parametrize("most", [2, 15, 40, 700, 9000])
def test_raw_reads_count_every_change_event_once_and_find_the_last_id(
    readers: Any, most: int
) -> None:
    rng = random.Random(most)
    events = [_event(10 * n, n) for n in range(1, 1500)]
    tally = _read_raw(readers, _stream(events, rng), rng, most)
    changes, last, _, _ = tally.result()
    assert changes == len(events)
    assert last == b"14990.0"


def test_the_exactly_once_check_tells_a_lost_or_repeated_event(readers: Any) -> None:
    rng = random.Random(5)
    events = [_event(10 * n, n) for n in range(1, 300)]
    reference = readers.Tally(True, readers.ROW_ID, readers.EVENT_ID)
    reference.add(b"".join(events), len(events))
    whole = _read_raw(readers, _stream(events, rng), rng, 300).result()
    lost = _read_raw(readers, _stream(events[:-1], rng), rng, 300).result()
    twice = _read_raw(readers, _stream([*events, events[-1]], rng), rng, 300).result()
    committed = [range(1, 300)]
    assert readers.exactly_once([reference.result(), whole], committed) == "yes"
    for wrong in (lost, twice):
        found = readers.exactly_once([reference.result(), whole, wrong], committed)
        assert found == "1 streams differ from the reference (count or last event id)"

"""tools/bench/stream_round.py: a stream's bytes read in pieces cut anywhere count each change
event once, when its block came whole (the benchmark itself is run by hand, not here)."""

from __future__ import annotations

import random

from tests.tools.bench_modules import load_bench


def test_change_events_are_counted_once_whatever_the_reads_cut() -> None:
    stream_round = load_bench("stream_round")
    blocks = [f'id: {n}.0\nevent: change\ndata: {{"n":{n}}}\n\n'.encode() for n in range(200)]
    body = b"".join(
        b"%x\r\n%b\r\n" % (len(part), part)
        for part in (b"".join(blocks[at : at + 7]) for at in range(0, 200, 7))
    )
    rng = random.Random(7)
    for _ in range(20):
        counted, tail, at = 0, b"", 0
        while at < len(body):
            size = rng.randrange(1, 300)
            found, tail = stream_round.changes_in(tail + body[at : at + size])
            counted += found
            at += size
        assert counted == 200

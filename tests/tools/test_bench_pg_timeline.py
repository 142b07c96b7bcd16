"""tools/bench/pg_timeline.py's matching of client requests to the server's marks: each
request's stages are its own marks', never a neighbour's, so no stage ends before it
starts (the old matching, by time alone per mark, took the previous answer's `sent`, which
returns after the client may have read it and sent the next request)."""

from __future__ import annotations

import re
from types import ModuleType

import pytest

from tests.tools.bench_modules import load_bench

US = 1000  # marks in ns, written here in microseconds
PORT = 5000


def _timeline(bench: ModuleType, served: list[dict[str, int]]) -> object:
    timeline = bench.Timeline()
    timeline.ports[7] = PORT
    timeline.on = True
    for marks in served:
        request = timeline.begin(7)
        for name, at in marks.items():
            timeline.mark(request, name, at * US)
    return timeline


def _requests(*spans: tuple[int, int]) -> list[tuple[int, int, int]]:
    """The client's requests on `PORT`: (began, read) in microseconds."""
    return [(PORT, began * US, read * US) for began, read in spans]


def _medians(out: str) -> dict[str, float]:
    return {
        m[1].strip(): float(m[2])
        for m in re.finditer(r"^  (\w[\w >()-]*?)\s+(-?[\d.]+)\s+-?[\d.]+", out, re.M)
    }


def _marks(first: int, sent: int) -> dict[str, int]:
    names = ("polled", "picked", "handed", "waiting", "durable", "posted", "taken")
    return {name: first + 10 * n for n, name in enumerate(names)} | {"sent": sent}


def test_a_send_returning_after_the_next_request_began_is_not_the_next_ones(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_bench("pg_timeline")
    # The first answer's send returns (at 200) after its client read it (180) and began the
    # next request (185).
    timeline = _timeline(bench, [_marks(100, 200), _marks(190, 290)])
    bench.report(timeline, _requests((90, 180), (185, 300)), 1.0)
    out = capsys.readouterr().out
    assert "2 matched" in out
    medians = _medians(out)
    assert medians["taken -> sent (the send)"] == pytest.approx((40 + 40) / 2)
    assert medians["client send -> polled"] == pytest.approx((10 + 5) / 2)
    assert all(value >= 0 for value in medians.values())


def test_a_request_with_marks_out_of_order_is_left_out_and_counted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = load_bench("pg_timeline")
    stale = _marks(100, 170) | {"polled": 50}  # its poll was an earlier event's
    timeline = _timeline(bench, [stale, _marks(200, 270)])
    bench.report(timeline, _requests((90, 180), (195, 300)), 1.0)
    out = capsys.readouterr().out
    assert "1 matched" in out
    assert "'client send -> polled': 1" in out

"""tools/bench/bulk_load.py compares like with like: each checkout serves a warm-up run that
is printed but not counted, and the measured runs' order turns at each pair (A B, then B A),
so that neither side always runs first; the order's check then prints the runs by place.
(The runs themselves are stood in for: a real one loads 1,000,000 rows.)"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def test_warm_up_runs_are_not_counted_and_the_order_turns_at_each_pair(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The benchmarks import each other by bare name, from their own folder.
    monkeypatch.syspath_prepend(str(BENCH))
    import bulk_load  # type: ignore[import-not-found]

    served: list[Path | None] = []

    def one_run(rows: int, idle: float, code: Path | None, *_: Any) -> dict[str, float]:
        served.append(code)
        # A figure that says which run it was: the medians show which runs were counted.
        figure = float(len(served))
        return {
            "import_s": 1.0,
            "import_rows_s": figure,
            **{
                f"{phase}_{what}": figure
                for phase in ("idle", "busy")
                for what in bulk_load._COLUMNS
            },
        }

    monkeypatch.setattr(bulk_load, "one_run", one_run)
    a, b = Path("/a"), Path("/b")
    argv = ["bulk_load.py", "--runs", "3", "--warmup", "1", "--code", "/a", "--code", "/b"]
    monkeypatch.setattr(sys, "argv", argv)
    bulk_load.main()
    out = capsys.readouterr().out
    # Warm-up A B, then A B, B A, A B: each side first in its pair as often as can be.
    assert served == [a, b, a, b, b, a, a, b]
    labels = re.findall(r"^((?:warm-up|run) \d+) \((.*?)\), load", out, re.MULTILINE)
    assert [label for label, _ in labels] == ["warm-up 1"] * 2 + ["run 1"] * 2 + ["run 2"] * 2 + [
        "run 3"
    ] * 2
    # /a's measured runs were the 3rd, 6th and 7th (median 6), not its warm-up (the 1st);
    # /b's the 4th, 5th and 8th (median 5).
    assert "/a: milliseconds, median of 3 run(s); the import took 1.0 s, 6 rows/s" in out
    assert "/b: milliseconds, median of 3 run(s); the import took 1.0 s, 5 rows/s" in out
    # By place: first were the 3rd, 5th and 7th runs, second the 4th, 6th and 8th.
    order = out.split("the order's check", 1)[1]
    assert re.search(r"^first\s+3\s.*\s5\.00$", order, re.MULTILINE)
    assert re.search(r"^second\s+3\s.*\s6\.00$", order, re.MULTILINE)

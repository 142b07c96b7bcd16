"""tools/bench/isolation.py refuses a `--hostile` kind it does not know before it starts
anything, naming the kinds it knows (the benchmark itself is run by hand, not here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"
KINDS = ("filters", "topn", "copies", "pipeline", "copyin", "prelogin")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    # Run from its own folder, as the benchmarks are (they import each other by bare name).
    return subprocess.run(
        [sys.executable, "isolation.py", *args],
        cwd=BENCH,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unknown_hostile_kind_is_refused_with_the_known_ones() -> None:
    done = run("--quick", "--hostile", "prelogin,floods")
    assert done.returncode == 2
    assert "unknown kind(s) floods" in done.stderr
    assert all(kind in done.stderr for kind in KINDS)
    # Refused before any server started or data was loaded.
    assert "loading" not in done.stderr
    assert done.stdout == ""


def test_help_names_every_hostile_kind() -> None:
    done = run("--help")
    assert done.returncode == 0
    assert "--hostile" in done.stdout
    assert all(kind in done.stdout for kind in KINDS)

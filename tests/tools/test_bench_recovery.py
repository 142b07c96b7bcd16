"""tools/bench/recovery.py's crashed logs: each checkout timed reopens the log its own code
wrote (a log of this version, with zeros written ahead of its end, is a torn tail to a
version before them, so `--against OLD` stopped at OLD's first reopen when this checkout
wrote the one log both read)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.bench_modules import load_bench


def test_a_crashed_log_reopens_whole_and_clean(tmp_path: Path) -> None:
    bench = load_bench("recovery")
    folder = bench.crashed(tmp_path, bench.CHECKOUT, 300, 100)
    figures = bench.reopen_once(folder)
    assert figures["rows"] == 300
    assert figures["replayed"] >= 300  # the whole log: no checkpoint was written


def test_each_checkout_writes_its_own_log_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = load_bench("recovery")
    writers: list[tuple[Path, str]] = []

    def run(code: Path, *arguments: str) -> str:
        writers.append((code, arguments[1]))
        Path(arguments[1]).mkdir()
        return ""

    monkeypatch.setattr(bench, "_run", run)
    old = tmp_path / "old-checkout"
    ours = bench.crashed(tmp_path, bench.CHECKOUT, 10, 10)
    theirs = bench.crashed(tmp_path, old, 10, 10)
    assert ours != theirs
    assert writers == [(bench.CHECKOUT, str(ours)), (old, str(theirs))]
    # A folder already there (`--reuse`) is not written again.
    assert bench.crashed(tmp_path, old, 10, 10) == theirs
    assert len(writers) == 2

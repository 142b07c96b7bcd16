"""tools/bench/compare.py: each chosen script runs once in its own process, with PostgreSQL
as its peer where there is one; without one, a script that can run alone is given
`--no-postgres` and the others are skipped, each said; the check lines the scripts append
to the record file come out as one table (the scripts themselves are stood in for)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.tools.bench_modules import load_bench


@pytest.fixture(scope="module")
def compare() -> Any:
    return load_bench("compare")


def _run(
    compare: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *argv: str
) -> list[list[str]]:
    """compare.main with `argv`, each script stood in for by one that appends a check line
    naming its arguments: each run's script and arguments."""
    runs: list[list[str]] = []

    def stand_in(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        runs.append(command[1:])
        record = kwargs["env"][compare.harness.CHECKS_FILE_VARIABLE]
        script = Path(command[1]).stem
        line = {"script": script, "label": " ".join(command[2:]), "value": 1.0, "target": ""}
        line |= {"met": False, "ours": None, "peer": None}
        with open(record, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        kwargs["stdout"].write(f"{script} ran\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(compare.subprocess, "run", stand_in)
    monkeypatch.setattr(compare, "postgres_available", lambda: True)
    monkeypatch.setattr(sys, "argv", ["compare.py", "--out", str(tmp_path), *argv])
    compare.main()
    return runs


def test_without_postgres_the_scripts_that_can_run_alone_do_and_the_others_are_skipped(
    compare: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = _run(compare, monkeypatch, tmp_path, "--quick", "--no-postgres")
    printed = capsys.readouterr().out
    alone = [bench for bench in compare.BENCHES if bench.alone]
    assert [Path(run[0]).stem for run in runs] == [bench.script for bench in alone]
    for run, bench in zip(runs, alone, strict=True):
        assert run[1:] == [*bench.quick, "--no-postgres"]
        assert f"{bench.called}: ok (refimpl alone: no PostgreSQL to compare with)" in printed
    for bench in compare.BENCHES:
        if not bench.alone:
            assert f"{bench.called}: skipped, no PostgreSQL to compare with" in printed


def test_with_postgres_every_script_runs_with_its_peer_and_its_lines_make_one_table(
    compare: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    runs = _run(compare, monkeypatch, tmp_path)
    printed = capsys.readouterr().out
    assert [run[1:] for run in runs] == [list(bench.full) for bench in compare.BENCHES]
    for bench in compare.BENCHES:
        # Each run's own output has a file of its own, a second run of a script too.
        assert (tmp_path / f"{bench.called}.txt").read_text() == f"{bench.script} ran\n"
        assert f"{bench.script}: {' '.join(bench.full)}".rstrip() in printed


def test_only_picks_a_second_run_of_a_script_by_its_own_name(
    compare: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (second,) = [bench for bench in compare.BENCHES if bench.called != bench.script]
    runs = _run(compare, monkeypatch, tmp_path, "--quick", "--only", second.called)
    assert runs == [[os.fspath(compare.HERE / f"{second.script}.py"), *second.quick]]

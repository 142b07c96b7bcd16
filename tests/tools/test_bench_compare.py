"""tools/bench/compare.py: each chosen script runs once in its own process, with PostgreSQL
as its peer where there is one; without one, a script that can run alone is given
`--no-postgres`, one with no peer at all runs as it is, and the others are skipped, each
said; the check lines the scripts append to the record file come out as one table, each
target with the issue that set it (the scripts themselves are stood in for)."""

from __future__ import annotations

import ast
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
    compare: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    *argv: str,
    checks: dict[str, list[tuple[str, str, bool]]] | None = None,
) -> list[list[str]]:
    """compare.main with `argv`, each script stood in for by one that appends a check line
    naming its arguments with no target, or `checks`' lines for it (label, target, met):
    each run's script and arguments."""
    runs: list[list[str]] = []

    def stand_in(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        runs.append(command[1:])
        record = kwargs["env"][compare.harness.CHECKS_FILE_VARIABLE]
        script = Path(command[1]).stem
        given = (checks or {}).get(script, [(" ".join(command[2:]), "", False)])
        with open(record, "a", encoding="utf-8") as out:
            for label, target, met in given:
                line = {"script": script, "label": label, "value": 1.0, "target": target}
                line |= {"met": met, "ours": None, "peer": None}
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
    alone = [bench for bench in compare.BENCHES if bench.alone or bench.peerless]
    assert [Path(run[0]).stem for run in runs] == [bench.script for bench in alone]
    for run, bench in zip(runs, alone, strict=True):
        if bench.peerless:
            assert run[1:] == list(bench.quick)
            assert f"{bench.called}: ok (no peer)" in printed
        else:
            assert run[1:] == [*bench.quick, "--no-postgres"]
            assert f"{bench.called}: ok (refimpl alone: no PostgreSQL to compare with)" in printed
    for bench in compare.BENCHES:
        if not (bench.alone or bench.peerless):
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


def test_the_hundred_subscribers_p99_runs_as_the_notes_measure_it_peer_or_not(
    compare: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for argv in (("--quick",), ("--quick", "--no-postgres")):
        (run,) = _run(compare, monkeypatch, tmp_path, *argv, "--only", "subscribe")
        assert Path(run[0]).name == "subscribe.py"
        # 100 streams of one symbol (--per-symbol 100): every commit wakes all 100.
        assert run[1:] == ["--phases", "100", "--per-symbol", "100", "--stream", "--quick"]
    (subscribe,) = [bench for bench in compare.BENCHES if bench.called == "subscribe"]
    assert subscribe.full == (*subscribe.quick[:-1], "--rounds", "3")


def test_each_target_in_the_table_says_the_issue_that_set_it(
    compare: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    checks = {
        "stream": [
            ("refimpl p99 commit-to-event at 20/s (ms)", "< 50", True),
            ("  the same, readers off the server's core", ">= 0.9", False),
            ("PostgreSQL commits/s with listeners / none", "", False),
        ],
        "subscribe": [
            ("commit-to-rows p99, 100 of 100 streams woken, median of 1 (ms)", "< 10 ms", True)
        ],
        "copy": [("COPY rows/s / (/imp rows/s)", ">= 1", True)],
    }
    _run(
        compare, monkeypatch, tmp_path, "--quick", "--only", "stream,subscribe,copy", checks=checks
    )
    printed = capsys.readouterr().out

    def row(measure: str) -> str:
        (line,) = [line for line in printed.splitlines() if line.startswith(measure + "  ")]
        return line

    assert "issue 15" in row("stream: refimpl p99 commit-to-event at 20/s (ms)")
    assert "issue 37" in row("stream:   the same, readers off the server's core")
    assert "issue 37" in row(
        "subscribe: commit-to-rows p99, 100 of 100 streams woken, median of 1 (ms)"
    )
    assert "issue 19's bench" in row("copy: COPY rows/s / (/imp rows/s)")
    assert "issue" not in row("stream: PostgreSQL commits/s with listeners / none")
    assert "issue 37's targets: 1 of 2 met" in printed


def _label_text(node: ast.expr) -> str:
    """A label's literal text, each part made at run time as {}."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(_label_text(part) for part in node.values)
    return "{}"


def _targeted_labels(script: str) -> list[str]:
    """The labels of the check lines with a target that `script`.py makes: in its own file,
    and in the functions it imports from the other scripts (stream.py's throughput lines are
    made by stream_throughput.py's throughput_report)."""
    bench = Path(__file__).resolve().parents[2] / "tools" / "bench"

    def parsed(name: str) -> ast.Module:
        return ast.parse((bench / f"{name}.py").read_text(encoding="utf-8"))

    tree = parsed(script)
    parts: list[ast.AST] = [tree]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (bench / f"{node.module}.py").exists():
            names = {alias.name for alias in node.names}
            parts += [
                function
                for function in parsed(str(node.module)).body
                if isinstance(function, ast.FunctionDef) and function.name in names
            ]
    labels = []
    for part in parts:
        for node in ast.walk(part):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr != "Check" or not node.args:
                continue
            target = node.args[2] if len(node.args) > 2 else None
            target = next((k.value for k in node.keywords if k.arg == "target"), target)
            if target is None or (isinstance(target, ast.Constant) and target.value == ""):
                continue
            labels.append(_label_text(node.args[0]))
    return labels


def test_every_target_of_the_scripts_run_has_its_issue_and_every_exception_a_line(
    compare: Any,
) -> None:
    scripts = sorted({bench.script for bench in compare.BENCHES})
    labels = {script: _targeted_labels(script) for script in scripts}
    assert labels["subscribe"] and labels["stream"] and labels["copy"]
    for script in scripts:
        for label in labels[script]:
            assert compare.target_source(script, label).startswith("issue "), (script, label)
    for entry in compare.SOURCES:
        assert entry.script in scripts
        # A fragment that no longer names a line would leave that line to the script's "".
        assert not entry.fragment or any(entry.fragment in label for label in labels[entry.script])

"""The sqllogictest runner (`refimpl sqllogictest`): its reading of the format, its value
rules, a small corpus of its own against a real server, and the real corpus when present."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.sqllogictest.answers import format_value, result_values, values_hash
from refimpl.sqllogictest.cli import main, script_files
from refimpl.sqllogictest.records import (
    Halt,
    HashThreshold,
    Query,
    ScriptError,
    Statement,
    read_script,
)
from refimpl.sqllogictest.runner import Server as SltServer
from refimpl.sqllogictest.runner import run_file
from tests.http.conftest import Server, running_server

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "sqllogictest"

# The least share of its records each corpus file outside triggers/ must pass (skipped
# records aside), in percent: every file passes all its records, and none answers other than
# SQLite (spec/queries.md, "The sqllogictest corpus").
CORPUS_MIN_RATE = 100.0

SCRIPT = """\
# a comment
hash-threshold 8

statement ok
CREATE TABLE t1(a INTEGER, b TEXT, c REAL)

statement ok
INSERT INTO t1 VALUES(1, 'one', 1.5), (2, '', NULL), (3, 'three', 2.25)

statement error
INSERT INTO nowhere VALUES(1)

query ITR rowsort
SELECT a, b, c FROM t1
----
1
one
1.500
2
(empty)
NULL
3
three
2.250

query I valuesort label-sum
SELECT a FROM t1 WHERE a > 1
----
2
3

query I nosort
SELECT a FROM t1 ORDER BY a DESC
----
3 values hashing to {md5}

skipif sqlite
query I nosort
SELECT 'never run here'
----
1

onlyif sqlite
query T nosort
SELECT ALL group_concat(b, '-') FROM t1 WHERE b <> ''
----
one-three

onlyif mysql
halt

query I nosort
SELECT count(*) FROM t1 WHERE a BETWEEN 2 AND NULL
----
0

query I nosort
SELECT 1
----
2

halt

query I nosort
SELECT 'after the halt'
----
1
"""


def _script() -> str:
    md5 = hashlib.md5(b"3\n2\n1\n", usedforsecurity=False).hexdigest()
    return SCRIPT.replace("{md5}", md5)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("slt") / "data") as running:
        yield running


# -- the format -------------------------------------------------------------------------------


def test_records_are_read_with_their_conditions() -> None:
    records = read_script(_script())
    kinds = [type(r).__name__ for r in records]
    assert kinds == [
        "HashThreshold",
        "Statement",
        "Statement",
        "Statement",
        "Query",
        "Query",
        "Query",
        "Query",
        "Query",
        "Halt",
        "Query",
        "Query",
        "Halt",
        "Query",
    ]
    assert records[0] == HashThreshold(2, 8)
    create = records[1]
    assert isinstance(create, Statement) and create.ok and create.sql.startswith("CREATE")
    assert isinstance(records[3], Statement) and not records[3].ok
    first = records[4]
    assert isinstance(first, Query)
    assert (first.types, first.sort, first.label) == ("ITR", "rowsort", None)
    assert first.expected.values is not None and len(first.expected.values) == 9
    hashed = records[6]
    assert isinstance(hashed, Query) and hashed.expected.count == 3
    assert records[7].conditions.skip_if == ("sqlite",)
    assert records[8].conditions.only_if == ("sqlite",)
    assert isinstance(records[9], Halt) and records[9].conditions.only_if == ("mysql",)


@pytest.mark.parametrize(
    "text",
    [
        "statement maybe\nSELECT 1\n",
        "query X nosort\nSELECT 1\n----\n1\n",
        "query I sideways\nSELECT 1\n",
        "skipif sqlite\n",
        "frobnicate\n",
    ],
)
def test_malformed_scripts_say_the_line(text: str) -> None:
    with pytest.raises(ScriptError, match=r"^line \d+"):
        read_script(text)


def test_values_are_written_as_sqllogictest_writes_them() -> None:
    assert [format_value(v, "I") for v in (7, -2.9, True, "12abc", "x", None)] == [
        "7",
        "-2",
        "1",
        "12",
        "0",
        "NULL",
    ]
    assert [format_value(v, "R") for v in (1, 2.5, 1 / 3, -9223372036854775806)] == [
        "1.000",
        "2.500",
        "0.333",
        "-9223372036854776000.000",
    ]
    assert [format_value(v, "T") for v in ("", "a b", "tab\there", 1.0, 2)] == [
        "(empty)",
        "a b",
        "tab@here",
        "1.0",
        "2",
    ]


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(-50, 50)), max_size=12))
def test_sort_modes_keep_the_values(rows: list[tuple[int, int]]) -> None:
    plain = result_values(rows, "II", "nosort")
    by_row = result_values(rows, "II", "rowsort")
    by_value = result_values(rows, "II", "valuesort")
    assert sorted(plain) == sorted(by_row) == by_value
    pairs = [by_row[i : i + 2] for i in range(0, len(by_row), 2)]
    assert pairs == sorted(pairs)
    digest = hashlib.md5("".join(v + "\n" for v in plain).encode(), usedforsecurity=False)
    assert values_hash(plain) == digest.hexdigest()


# -- against a server ---------------------------------------------------------------------------


def test_a_small_script_runs_against_a_server(server: Server, tmp_path: Path) -> None:
    script = tmp_path / "small.test"
    script.write_text(_script())
    result = run_file(SltServer(server.url, server.token), script)
    assert result.skipped == 1
    assert result.halted_at is not None
    assert [(f.line, f.kind) for f in result.failures] == [(57, "wrong")]
    assert result.passed == 8


def test_a_query_written_without_values_may_fail(server: Server, tmp_path: Path) -> None:
    # SQLite's completion writes no values for a query SQLite failed: a refusal passes it, a
    # refusal of a query with values does not.
    script = tmp_path / "failing.test"
    script.write_text(
        "query I nosort\nSELECT nope\n----\n\n"
        "query I nosort\nSELECT 1 WHERE false\n----\n\n"
        "query I nosort\nSELECT nope\n----\n1\n"
    )
    result = run_file(SltServer(server.url, server.token), script)
    assert result.passed == 2
    assert [(f.line, f.kind) for f in result.failures] == [(9, "refused")]


def test_the_command_reports_each_file(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "small.test").write_text(_script())
    (tmp_path / "skipped").mkdir()
    (tmp_path / "skipped" / "other.test").write_text("statement ok\nSELECT 1\n")
    argv = ["--url", server.url, "--token", server.token, "--exclude", "*/skipped/*", str(tmp_path)]
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "answering to skipif/onlyif sqlite" in out
    assert "small.test: 8 passed, 1 failed (0 refused, 1 wrong, 0 broken), 1 skipped" in out
    assert "line 57 [wrong]: SELECT 1" in out
    assert "other.test" not in out
    assert main([*argv, "--min-rate", "85"]) == 0
    assert main([*argv, "--min-rate", "90"]) == 1
    assert script_files([tmp_path], []) == sorted(tmp_path.rglob("*.test"))


@pytest.mark.skipif(not CORPUS.is_dir(), reason=f"the corpus is not at {CORPUS}")
def test_the_corpus_passes_its_stated_rate(server: Server) -> None:
    files = script_files([CORPUS], ["*/triggers/*"])
    assert files, f"no *.test files under {CORPUS}"
    client = SltServer(server.url, server.token)
    results = [run_file(client, path) for path in files]
    broken = [(r.path.name, f.line) for r in results for f in r.failures if f.kind == "broken"]
    assert not broken, f"5xx or no answer at {broken}"
    wrong = {r.path.name: [f.line for f in r.failures if f.kind == "wrong"] for r in results}
    assert not any(wrong.values()), f"answers other than SQLite's at {wrong}"
    low = {r.path.name: round(100 * r.rate, 2) for r in results if 100 * r.rate < CORPUS_MIN_RATE}
    assert not low, f"files below their stated rate: {low}"


def test_a_wrong_target_or_path_is_one_line(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "small.test"
    script.write_text(_script())
    cases = [
        (["--url", server.url, "--token", server.token, str(tmp_path / "nope")], "no such file"),
        (["--url", server.url, "--token", "wrong", str(script)], "refuses the token (401)"),
        (["--url", "http://127.0.0.1:1", str(script)], "cannot reach http://127.0.0.1:1"),
    ]
    for argv, says in cases:
        assert main(argv) == 2
        errors = capsys.readouterr().err.strip().splitlines()
        assert len(errors) == 1 and says in errors[0], errors


def test_reports_rerun_and_fail_fast(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_fails.test").write_text(_script())
    (tmp_path / "b_passes.test").write_text("statement ok\nSELECT 1\n")
    report, junit = tmp_path / "first.json", tmp_path / "junit.xml"
    argv = ["--url", server.url, "--token", server.token]
    assert main([*argv, "--json", str(report), "--junit", str(junit), str(tmp_path)]) == 1
    document = json.loads(report.read_text())
    assert document["runner_version"] and document["duration_s"] > 0
    outcomes = {Path(f["path"]).name: f["outcome"] for f in document["files"]}
    assert outcomes == {"a_fails.test": "failed", "b_passes.test": "passed"}
    assert 'failures="1"' in junit.read_text() and "line 57 [wrong]" in junit.read_text()
    capsys.readouterr()
    assert main([*argv, "--rerun-failed", str(report), str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "a_fails.test" in out and "b_passes.test" not in out
    assert main([*argv, "--fail-fast", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "--fail-fast" in out and "b_passes.test" not in out

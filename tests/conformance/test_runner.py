"""Unit tests of the conformance runner: matchers, case loading, diffs, and runs against a
tiny stub HTTP server made here (the stub tests the runner only, not the database)."""

from __future__ import annotations

import json
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance import cli
from conformance.case_files import load_examples, schema_errors
from conformance.cases import (
    CaseError,
    dump_chapter,
    example_from_json,
    extract_chapter,
    find_blocks,
    parse_sql_records,
    render_sql_record,
    render_value,
)
from conformance.expectations import Expectation, id_matches, load_expectations
from conformance.matchers import match, validate_matchers
from conformance.payloads import (
    SubstitutionError,
    parse_sse,
    resolve_path,
    substitute,
    unsubstitute,
)
from conformance.report import counts, print_report, summary_line, write_json, write_junit
from conformance.results import FAILED, PASSED, SKIPPED, XFAILED, XPASSED
from conformance.runner import Runner, RunOptions
from tests.conformance.fake_http import ADMIN, FakeState, http_example

# ---------------------------------------------------------------------------------------
# Matchers
# ---------------------------------------------------------------------------------------


def test_literals_match_exactly() -> None:
    assert match({"a": 1, "b": [1, "x", None]}, {"a": 1, "b": [1, "x", None]}).ok
    assert match(10, 10.0).ok
    assert not match(1, True).ok
    assert not match(True, 1).ok
    assert not match({"a": 1}, {"a": 1, "b": 2}).ok
    assert not match({"a": 1, "b": 2}, {"a": 1}).ok
    assert not match([1, 2], [1, 2, 3]).ok
    assert not match("1", 1).ok


def test_int_and_number_bounds() -> None:
    assert match({"$match": "int"}, 5).ok
    assert not match({"$match": "int"}, 5.5).ok
    assert not match({"$match": "int"}, True).ok
    assert match({"$match": "number"}, 5.5).ok
    assert match({"$match": "int", "gt": 4, "le": 5}, 5).ok
    assert not match({"$match": "int", "gt": 5}, 5).ok
    assert match({"$match": "int", "ge": 5, "lt": 6}, 5).ok
    out = match({"$match": "int", "lt": 3}, 7)
    assert not out.ok and "< 3" in out.mismatches[0]


def test_string_timestamp_any() -> None:
    assert match({"$match": "string", "regex": "^kdb_"}, "kdb_abc").ok
    assert not match({"$match": "string", "regex": "^kdb_"}, "abc").ok
    assert not match({"$match": "string"}, 3).ok
    assert match({"$match": "timestamp"}, "2026-09-24T10:00:00.000Z").ok
    assert match({"$match": "timestamp"}, "2026-09-24T10:00:00Z").ok
    assert not match({"$match": "timestamp"}, "2026-09-24 10:00:00").ok
    assert match({"$match": "any"}, None).ok
    assert not match({"x": {"$match": "any"}}, {}).ok


def test_capture_and_same() -> None:
    captures: dict[str, Any] = {}
    out = match(
        {"boot": {"$match": "string", "capture": "boot"}, "rev": "x"},
        {"boot": "b1", "rev": "x"},
        captures,
    )
    assert out.ok and captures == {"boot": "b1"}
    assert match({"$match": "same", "as": "boot"}, "b1", captures).ok
    assert not match({"$match": "same", "as": "boot"}, "b2", captures).ok
    assert not match({"$match": "same", "as": "nope"}, "b1", captures).ok
    # a failed match captures nothing
    fresh: dict[str, Any] = {}
    assert not match([{"$match": "any", "capture": "a"}, 2], [1, 3], fresh).ok
    assert fresh == {}


def test_capture_used_as_bound() -> None:
    captures = {"lsn1": 4}
    assert match({"$match": "int", "gt": "lsn1"}, 5, captures).ok
    assert not match({"$match": "int", "gt": "lsn1"}, 4, captures).ok


def test_unordered() -> None:
    m = {"$match": "unordered", "items": [[1, "a"], [2, "b"]]}
    assert match(m, [[2, "b"], [1, "a"]]).ok
    assert not match(m, [[2, "b"], [1, "c"]]).ok
    assert not match(m, [[1, "a"]]).ok
    wild = {"$match": "unordered", "items": [{"$match": "int"}, 1]}
    assert match(wild, [1, 7]).ok  # needs backtracking: 1 must go to the literal


def test_contains() -> None:
    m = {"$match": "contains", "value": {"a": 1, "b": {"$match": "string"}}}
    assert match(m, {"a": 1, "b": "x", "c": 3}).ok
    assert not match(m, {"a": 1}).ok
    assert not match(m, {"a": 2, "b": "x"}).ok
    listed = {"$match": "contains", "value": [["u1", False, 1]]}
    assert match(listed, [["admin", True, 1], ["u1", False, 1]]).ok
    assert not match(listed, [["admin", True, 1]]).ok


def test_expected_view_shows_only_real_differences() -> None:
    expected = {"lsn": {"$match": "int"}, "op": "upsert", "t": {"$match": "timestamp"}}
    actual = {"lsn": 7, "op": "delete", "t": "2026-01-01T00:00:00.000Z"}
    out = match(expected, actual)
    assert not out.ok
    assert out.expected_view == {"lsn": 7, "op": "upsert", "t": "2026-01-01T00:00:00.000Z"}
    # the update view keeps matchers that matched and takes actual values elsewhere
    assert out.update_view == {
        "lsn": {"$match": "int"},
        "op": "delete",
        "t": {"$match": "timestamp"},
    }


def test_validate_matchers() -> None:
    assert validate_matchers({"a": {"$match": "int"}}) == []
    assert validate_matchers({"a": {"$match": "nope"}})
    assert validate_matchers({"$match": "same"})
    assert validate_matchers({"$match": "string", "regex": "("})


# ---------------------------------------------------------------------------------------
# Substitution, paths, SSE
# ---------------------------------------------------------------------------------------


def test_substitute() -> None:
    v = {"db": "conf_1", "n": 4, "uniq": "ab"}
    assert substitute("{{n}}", v) == 4
    assert substitute("after {{n}}", v) == "after 4"
    assert substitute({"u_{{uniq}}": ["{{db}}", 1]}, v) == {"u_ab": ["conf_1", 1]}
    with pytest.raises(SubstitutionError):
        substitute("{{missing}}", v)
    assert unsubstitute("user 'u_ab' in conf_ab", {"db": "conf_ab", "uniq": "ab"}) == (
        "user 'u_{{uniq}}' in {{db}}"
    )


def test_resolve_path() -> None:
    root = {
        "json": {"dataset": [[1, "tok"]]},
        "headers": {"content-type": "x"},
        "sse": [{"id": "5"}],
    }
    assert resolve_path(root, "$.json.dataset[0][1]") == "tok"
    assert resolve_path(root, "$.headers.Content-Type") == "x"
    assert resolve_path(root, "$.sse[-1].id") == "5"
    with pytest.raises(KeyError):
        resolve_path(root, "$.json.nope")


def test_parse_sse() -> None:
    text = (
        ': hello\n\nretry: 1000\n\nevent: change\nid: 4\ndata: {"lsn": 4}\n\n'
        "data: a\ndata: b\n\nevent: tail\ndata: 1"
    )
    assert parse_sse(text) == [
        {"retry": 1000},
        {"event": "change", "id": "4", "data": {"lsn": 4}},
        {"event": "message", "data": "a\nb"},
    ]


# ---------------------------------------------------------------------------------------
# Case files
# ---------------------------------------------------------------------------------------

CHAPTER = """# Chapter

## Inserting

````text
```sql-example id=not-an-example
statement ok
SELECT 1
```
````

```sql-example id=insert-basic
statement ok
CREATE TABLE t (id INT, name STRING)

statement ok
INSERT INTO t VALUES (1, 'a'), (2, NULL)
----
2 row(s) inserted

# a comment
query id:INT name:STRING rowsort
SELECT id, name
FROM t
----
1 | a
2 | NULL

statement error does not exist
SELECT * FROM nope
```

## Over HTTP

```http-example id=exec-get
{"setup": ["CREATE TABLE t (id INT)"],
 "request": {"path": "/exec", "query": {"query": "SELECT 1"}},
 "expect": {"status": 200, "json": {"$match": "contains", "value": {"count": 1}}}}
```
"""


def test_find_blocks_handles_nested_fences() -> None:
    blocks = find_blocks(CHAPTER)
    assert [b.info.split()[0] for b in blocks] == ["text", "sql-example", "http-example"]
    assert blocks[1].heading == "Inserting"
    assert blocks[1].fence_line == 12


def test_extract_chapter() -> None:
    doc = extract_chapter(CHAPTER, "spec/demo.md", "0.0.0")
    assert schema_errors(doc) == []
    sql, http = doc["examples"]
    assert sql["id"] == "insert-basic" and sql["kind"] == "sql"
    assert sql["lines"] == [13, 30]
    records = sql["records"]
    assert records[1] == {
        "type": "statement",
        "expect": "ok",
        "sql": "INSERT INTO t VALUES (1, 'a'), (2, NULL)",
        "message": "2 row(s) inserted",
        "line": 16,
        "end_line": 19,
    }
    assert records[2]["columns"] == [
        {"name": "id", "type": "INT"},
        {"name": "name", "type": "STRING"},
    ]
    assert records[2]["sort"] == "rowsort"
    assert records[2]["sql"] == "SELECT id, name\nFROM t"
    assert records[2]["rows"] == [["1", "a"], ["2", "NULL"]]
    assert records[3]["pattern"] == "does not exist"
    step = http["steps"][0]
    assert step["request"]["method"] == "GET" and step["request"]["auth"] == "admin"
    assert http["setup"] == ["CREATE TABLE t (id INT)"]


def test_record_roundtrip() -> None:
    text = 'query "my col":INT b:STRING rowsort\nSELECT 1\n----\n1 | x'
    record = parse_sql_records(text, 1, "f")[0]
    assert record["columns"][0]["name"] == "my col"
    assert render_sql_record(record) == text


@pytest.mark.parametrize(
    "block, message",
    [
        ("query id:INT\nSELECT 1, 2\n----\n1 | 2", "has 2 value"),
        ("query id:NUMBER\nSELECT 1\n----\n1", "unknown type"),
        ("statement maybe\nSELECT 1", "unknown record"),
        ("statement ok", "no SQL"),
        ("query id:INT\nSELECT 1", "needs ----"),
    ],
)
def test_bad_records(block: str, message: str) -> None:
    with pytest.raises(CaseError, match=message):
        parse_sql_records(block, 1, "f")


def test_duplicate_ids_and_bad_json() -> None:
    twice = "```sql-example id=a\nstatement ok\nSELECT 1\n```\n" * 2
    with pytest.raises(CaseError, match="used twice"):
        extract_chapter(twice, "x.md", "0.0.0")
    with pytest.raises(CaseError, match="x.md:2: bad JSON"):
        extract_chapter("```http-example id=b\n{nope\n```\n", "x.md", "0.0.0")
    with pytest.raises(CaseError, match="unknown matcher"):
        extract_chapter(
            '```http-example id=c\n{"request": {"path": "/"}, "expect": {"json": '
            '{"$match": "float"}}}\n```\n',
            "x.md",
            "0.0.0",
        )


def test_load_examples_validates(tmp_path: Path) -> None:
    doc = extract_chapter(CHAPTER, "spec/demo.md", "0.0.0")
    (tmp_path / "demo.json").write_text(dump_chapter(doc))
    examples = load_examples(tmp_path)
    assert [e.id for e in examples] == ["insert-basic", "exec-get"]
    assert examples[0].location == "spec/demo.md:13-30"
    broken = dict(doc, examples=[dict(doc["examples"][0], kind="ftp")])
    (tmp_path / "demo.json").write_text(json.dumps(broken))
    with pytest.raises(CaseError):
        load_examples(tmp_path)
    (tmp_path / "demo.json").write_text(dump_chapter(doc))
    (tmp_path / "again.json").write_text(dump_chapter(doc))
    with pytest.raises(CaseError, match="also in"):
        load_examples(tmp_path)


def test_render_value() -> None:
    assert [render_value(v) for v in (None, True, False, 3, 10.0, 1.5, "", "x", -0.25)] == [
        "NULL",
        "true",
        "false",
        "3",
        "10",
        "1.5",
        "(empty)",
        "x",
        "-0.25",
    ]


# ---------------------------------------------------------------------------------------
# A stub server, to run the runner end to end
# ---------------------------------------------------------------------------------------


def _sql_example(ex_id: str, block: str, needs: str = "") -> Any:
    info = f"sql-example id={ex_id}" + (f" needs={needs}" if needs else "")
    doc = extract_chapter(f"# T\n\n```{info}\n{block}\n```\n", "spec/t.md", "0.0.0")
    return example_from_json(doc["examples"][0])


def test_sql_example_passes_and_cleans_up(server: tuple[str, FakeState]) -> None:
    url, state = server
    example = _sql_example(
        "ok",
        "statement ok\nINSERT INTO t VALUES (1)\n----\n1 row(s) inserted\n\n"
        "query id:INT bal:DOUBLE rowsort\nSELECT * FROM t\n----\n1 | 10.5\n2 | 20\n\n"
        "statement ok\nWHO\n----\ndb {{db}}\n\n"
        "statement error ^syntax\nBROKEN",
    )
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == PASSED, result.message + result.diff
    assert state.databases == {"demo"}  # the example's database was dropped
    assert result.database.startswith("conf_")


def test_sql_example_failure_has_a_diff(server: tuple[str, FakeState]) -> None:
    url, _ = server
    example = _sql_example(
        "bad", "query id:INT bal:DOUBLE\nSELECT * FROM t\n----\n1 | 10.5\n2 | 20"
    )
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == FAILED
    assert "spec/t.md:4" in result.message and "rows differ" in result.message
    assert "+2 | 20" in result.diff and "-2 | 20" in result.diff
    assert result.request.startswith("POST /exec?db=conf_")
    update = result.updates[0]
    assert update["kind"] == "sql-record" and update["record"]["rows"] == [
        ["2", "20"],
        ["1", "10.5"],
    ]


def test_http_example_with_captures(server: tuple[str, FakeState]) -> None:
    url, state = server
    example = http_example(
        "tok",
        {
            "setup": ["INSERT INTO t VALUES (1)"],
            "steps": [
                {
                    "request": {"sql": "CREATE TOKEN FOR u_{{uniq}}"},
                    "capture": {"tok": "$.json.dataset[0][0]"},
                },
                {
                    "request": {"path": "/exec", "query": {"query": "SELECT 1"}, "auth": "tok"},
                    "expect": {
                        "status": 200,
                        "content_type": "application/json",
                        "json": {
                            "$match": "contains",
                            "value": {"count": {"$match": "int", "gt": 1, "capture": "n"}},
                        },
                    },
                },
                {
                    "request": {
                        "path": "/exec",
                        "query": {"query": "SELECT {{n}}"},
                        "auth": "wrong",
                    },
                    "expect": {
                        "status": 401,
                        "headers": {"WWW-Authenticate": "Bearer"},
                        "json": {"error": {"$match": "string"}},
                    },
                },
                {
                    "request": {"path": "/exec", "query": {"query": "SELECT 1", "db": "nope"}},
                    "expect": {"status": 404, "json": {"error": "database 'nope' does not exist"}},
                },
            ],
        },
    )
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == PASSED, result.message + result.diff
    gets = [q for m, p, q in state.requests if p == "/exec" and "query" in q]
    assert any(q["query"] == ["SELECT 2"] for q in gets)
    assert any(q.get("db") == ["nope"] for q in gets)


def test_http_failure_diff_and_update(server: tuple[str, FakeState]) -> None:
    url, _ = server
    example = http_example(
        "diff",
        {
            "request": {"path": "/exp"},
            "expect": {
                "status": 200,
                "body": "id,name\r\n1,b\r\n",
                "csv": [["id", "name"], ["1", "a"]],
            },
        },
    )
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == FAILED
    assert '-    "1,b\\r\\n"' in result.diff and '+    "1,a\\r\\n"' in result.diff
    assert result.updates[0]["expect"]["body"] == "id,name\r\n1,a\r\n"
    assert result.request.startswith("GET /exp?db=conf_")


def test_sse_answers_and_stream_limits(server: tuple[str, FakeState]) -> None:
    url, _ = server
    example = http_example(
        "sse",
        {
            "steps": [
                {
                    "request": {"path": "/events"},
                    "expect": {
                        "content_type": "text/event-stream",
                        "sse": [
                            {"retry": 1000},
                            {
                                "event": "change",
                                "id": {"$match": "string", "capture": "p"},
                                "data": {"$match": "contains", "value": {"op": "upsert"}},
                            },
                            {"event": "position", "id": {"$match": "same", "as": "p"}, "data": {}},
                        ],
                    },
                },
                {
                    "request": {"path": "/stream", "read": {"events": 1, "timeout": 2}},
                    "expect": {"sse": [{"event": "tick", "id": "0", "data": 0}]},
                },
            ]
        },
    )
    started = time.monotonic()
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == PASSED, result.message + result.diff
    assert time.monotonic() - started < 2.5


def test_needs_missing_database_skips(server: tuple[str, FakeState]) -> None:
    url, _ = server
    example = _sql_example("needy", "statement ok\nINSERT INTO t VALUES (1)", needs="sample")
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == SKIPPED and "sample" in result.message


def test_unknown_capture_is_a_broken_example(server: tuple[str, FakeState]) -> None:
    url, _ = server
    example = http_example("broken", {"request": {"path": "/exec", "auth": "{{nothing}}"}})
    result = Runner(RunOptions(url, ADMIN)).run(example)
    assert result.verdict == FAILED and "broken" in result.message


def test_expectations_and_reports(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, _ = server
    good = _sql_example("good-one", "statement ok\nINSERT INTO t VALUES (1)")
    bad = _sql_example("bad-one", "statement ok\nNONSENSE")
    known = _sql_example("known-bad", "statement ok\nNONSENSE")
    skipped = _sql_example("skip-me", "statement ok\nNONSENSE")
    rules = [
        Expectation("good-one", "FAIL", "was broken"),
        Expectation("known-*", "FAIL", "not done"),
        Expectation("skip-me", "SKIP", "slow"),
    ]
    seen: list[str] = []
    results = Runner(RunOptions(url, ADMIN)).run_all(
        [good, bad, known, skipped],
        jobs=3,
        expectations=rules,
        on_result=lambda r: seen.append(r.example.id),
    )
    assert [r.outcome for r in results] == [XPASSED, FAILED, XFAILED, SKIPPED]
    assert sorted(seen) == sorted(["good-one", "bad-one", "known-bad", "skip-me"])
    assert counts(results)["failed"] == 2
    assert summary_line(results) == "0 passed, 2 failed, 2 skipped"
    junit = tmp_path / "j.xml"
    write_junit(results, junit)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2" and suite.get("tests") == "4"
    report = tmp_path / "r.json"
    write_json(results, report, url)
    assert json.loads(report.read_text())["summary"]["xfailed"] == 1

    import io

    out = io.StringIO()
    print_report(results, out)
    text = out.getvalue()
    assert text.splitlines()[-1] == "0 passed, 2 failed, 2 skipped"
    assert "FAILED good-one" in text and "remove it from the expectations file" in text


def test_expectation_file_formats(tmp_path: Path) -> None:
    text_file = tmp_path / "known.txt"
    text_file.write_text("# comment\nsql-* FAIL engine not done\nx-1 SKIP slow\n")
    items = load_expectations(text_file)
    assert [(e.pattern, e.outcome, e.reason) for e in items] == [
        ("sql-*", "FAIL", "engine not done"),
        ("x-1", "SKIP", "slow"),
    ]
    json_file = tmp_path / "known.json"
    json_file.write_text(json.dumps([{"id": "a", "expect": "FAIL", "reason": "r"}]))
    assert load_expectations(json_file)[0].reason == "r"
    text_file.write_text("a PASS because\n")
    with pytest.raises(ValueError):
        load_expectations(text_file)
    assert id_matches("insert", "sql-insert-basic") and id_matches("sql-*", "sql-x")
    assert not id_matches("sql-?", "sql-xy")


def test_cli_main(
    server: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = server
    doc = extract_chapter(
        "```sql-example id=cli-ok\nstatement ok\nINSERT INTO t VALUES (1)\n```\n\n"
        "```sql-example id=cli-bad\nstatement ok\nNONSENSE\n```\n",
        "spec/c.md",
        "0.0.0",
    )
    (tmp_path / "c.json").write_text(dump_chapter(doc))
    code = cli.main(
        ["--url", url, "--token", ADMIN, "--examples", str(tmp_path), "--only", "cli-ok"]
    )
    assert code == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
    expect = tmp_path / "expect.txt"
    expect.write_text("cli-bad FAIL not yet\n")
    junit = tmp_path / "out.xml"
    code = cli.main(
        [
            "--url",
            url,
            "--token",
            ADMIN,
            "--examples",
            str(tmp_path / "c.json"),
            "--expect-file",
            str(expect),
            "--junit",
            str(junit),
            "--jobs",
            "2",
        ]
    )
    assert code == 0 and junit.exists()
    code = cli.main(["--url", url, "--token", ADMIN, "--examples", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED cli-bad" in out and "spec/c.md:" in out
    assert cli.main(["--url", url, "--examples", str(tmp_path / "none.json")]) == 2


# ---------------------------------------------------------------------------------------
# The runner as a product: preflight, --fail-fast, --rerun-failed, the report, cleanup
# ---------------------------------------------------------------------------------------


def _chapter_file(tmp_path: Path) -> Path:
    doc = extract_chapter(
        "```sql-example id=pf-ok\nstatement ok\nINSERT INTO t VALUES (1)\n```\n\n"
        "```sql-example id=pf-bad\nstatement ok\nNONSENSE\n```\n\n"
        "```sql-example id=pf-later\nstatement ok\nINSERT INTO t VALUES (2)\n```\n",
        "spec/pf.md",
        "0.0.0",
    )
    path = tmp_path / "pf.json"
    path.write_text(dump_chapter(doc))
    return path


@pytest.mark.parametrize(
    ("url", "token", "extra", "says"),
    [
        ("ftp://127.0.0.1:1", ADMIN, [], "is not an http:// or https:// URL"),
        ("http://127.0.0.1:1", ADMIN, [], "cannot reach http://127.0.0.1:1"),
        (None, "wrong", [], "refuses the token (401)"),
        (None, None, ["--pg", "127.0.0.1:1"], "nothing accepts connections at --pg"),
        (None, None, ["--pg", "nonsense"], "is not HOST:PORT"),
    ],
)
def test_preflight_says_once_what_is_wrong(
    server: tuple[str, FakeState],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    url: str | None,
    token: str | None,
    extra: list[str],
    says: str,
) -> None:
    pytest.importorskip("psycopg") if extra else None
    argv = ["--url", url or server[0], "--token", token or ADMIN, "--examples"]
    code = cli.main([*argv, str(_chapter_file(tmp_path)), *extra])
    captured = capsys.readouterr()
    assert code == 2
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and says in errors[0], captured.err
    assert "running" not in captured.out  # no example ran


def test_preflight_refuses_a_token_that_is_not_the_admins(
    server: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = server
    state.tokens.add("reader")
    code = cli.main(["--url", url, "--token", "reader", "--examples", str(_chapter_file(tmp_path))])
    assert code == 2 and "not the admin's (403" in capsys.readouterr().err


def test_fail_fast_skips_what_follows_the_first_failure(
    server: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.json"
    argv = ["--url", server[0], "--token", ADMIN, "--examples", str(_chapter_file(tmp_path))]
    code = cli.main([*argv, "--jobs", "1", "--fail-fast", "--json", str(report)])
    assert code == 1
    outcomes = {r["id"]: r["outcome"] for r in json.loads(report.read_text())["results"]}
    assert outcomes == {"pf-ok": "passed", "pf-bad": "failed", "pf-later": "skipped"}


def test_rerun_failed_runs_what_the_report_lists_and_the_report_says_when(
    server: tuple[str, FakeState], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    argv = ["--url", server[0], "--token", ADMIN, "--examples", str(_chapter_file(tmp_path))]
    assert cli.main([*argv, "--json", str(first)]) == 1
    report = json.loads(first.read_text())
    assert report["runner_version"] and report["duration_s"] > 0
    assert report["started_at"].endswith("+00:00")
    assert cli.main([*argv, "--rerun-failed", str(first), "--json", str(second)]) == 1
    assert [r["id"] for r in json.loads(second.read_text())["results"]] == ["pf-bad"]
    (tmp_path / "broken.json").write_text("[1]")
    assert cli.main([*argv, "--rerun-failed", str(tmp_path / "broken.json")]) == 2
    assert "is not a JSON report" in capsys.readouterr().err


def test_the_users_an_example_makes_are_dropped_after_it(
    server: tuple[str, FakeState], tmp_path: Path
) -> None:
    url, state = server
    doc = extract_chapter(
        "```sql-example id=mk-user\nstatement ok\nCREATE USER u_{{uniq}}\n\n"
        "statement ok\nNONSENSE\n```\n",
        "spec/u.md",
        "0.0.0",
    )
    (tmp_path / "u.json").write_text(dump_chapter(doc))
    before = set(state.users)
    assert cli.main(["--url", url, "--token", ADMIN, "--examples", str(tmp_path / "u.json")]) == 1
    assert state.users == before  # dropped also after the example failed

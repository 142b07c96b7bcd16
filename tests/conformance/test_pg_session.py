"""`pg` steps: the runner's own PostgreSQL protocol client, and the verdicts it gives.

A small scripted server stands for an implementation under test: it logs a client in and
answers each Query as the test tells it, so that each field a `pg` step compares can be
made to lie. (The examples of spec/pgwire.md run against refimpl itself in the live suite.)
"""

from __future__ import annotations

import struct
from typing import Any

import pytest

from conformance.cases import CaseError, example_from_json, normalize_http
from conformance.pg_session import PgStepError, decode_backend, encode_frontend
from conformance.results import FAILED, PASSED, SKIPPED
from conformance.runner import NO_PG, Runner, RunOptions
from tests.conformance.fake_http import ADMIN
from tests.conformance.pg_scripted import Script, ScriptedServer, complete, error, ready


def honest(sql: str) -> bytes:
    if sql == "BEGIN":
        return complete("BEGIN") + ready(b"T")
    if sql == "SELECT nope":
        return error("42703", "column 'nope' does not exist") + ready(b"E")
    return complete("ROLLBACK") + ready(b"I")


def lies_about_the_status(sql: str) -> bytes:
    return complete("BEGIN") + ready(b"I") if sql == "BEGIN" else honest(sql)


def lies_about_the_sqlstate(sql: str) -> bytes:
    if sql == "SELECT nope":
        return error("42000", "column 'nope' does not exist") + ready(b"E")
    return honest(sql)


def lies_about_the_tag(sql: str) -> bytes:
    return complete("COMMIT") + ready(b"I") if sql == "ROLLBACK" else honest(sql)


EXAMPLE = {
    "steps": [
        {
            "pg": {"session": "a", "send": [{"Query": "BEGIN"}, {"Query": "SELECT nope"}]},
            "expect": [
                {"type": "CommandComplete", "tag": "BEGIN"},
                {"type": "ReadyForQuery", "status": "T"},
                {
                    "type": "ErrorResponse",
                    "severity": "ERROR",
                    "code": "42703",
                    "message": {"$match": "string"},
                },
                {"type": "ReadyForQuery", "status": "E"},
            ],
        },
        {
            "pg": {"session": "a", "send": [{"Query": "ROLLBACK"}]},
            "expect": [
                {"type": "CommandComplete", "tag": "ROLLBACK"},
                {"type": "ReadyForQuery", "status": "I"},
            ],
        },
        {
            "pg": {"auth": "wrong", "send": [{"Query": "BEGIN"}]},
            "expect": [
                {
                    "type": "ErrorResponse",
                    "severity": "FATAL",
                    "code": "28P01",
                    "message": {"$match": "any"},
                }
            ],
        },
    ]
}


@pytest.fixture
def fake_http(server: tuple[str, Any]) -> str:
    """The HTTP half (the example's database is made there): the scripted HTTP server."""
    return server[0]


def _run(http_url: str, script: Script | None, example: dict[str, Any] = EXAMPLE) -> Any:
    pg = ScriptedServer(script) if script else None
    try:
        options = RunOptions(http_url, ADMIN, timeout=5, pg_address=pg.address if pg else None)
        data = normalize_http(example, "spec/t.md")
        built = example_from_json(
            {"id": "pg-x", "kind": "http", "source": "spec/t.md", "lines": [1, 2], **data}
        )
        return Runner(options).run(built)
    finally:
        if pg:
            pg.close()


def test_an_honest_server_passes(fake_http: str) -> None:
    result = _run(fake_http, honest)
    assert result.verdict == PASSED, (result.message, result.diff)


@pytest.mark.parametrize(
    ("script", "says"),
    [
        (lies_about_the_status, "'T'"),
        (lies_about_the_sqlstate, "42703"),
        (lies_about_the_tag, "ROLLBACK"),
    ],
)
def test_each_lie_fails_the_step_that_sees_it(fake_http: str, script: Script, says: str) -> None:
    result = _run(fake_http, script)
    assert result.verdict == FAILED
    assert says in result.message + result.diff


def test_without_the_address_the_example_is_skipped_with_the_reason(fake_http: str) -> None:
    result = _run(fake_http, None)
    assert result.verdict == SKIPPED and result.message == NO_PG


def test_a_server_that_never_answers_fails_in_time(fake_http: str) -> None:
    result = _run(fake_http, lambda sql: b"")
    assert result.verdict == FAILED and "no whole message" in result.message


def test_broken_steps_are_case_errors() -> None:
    with pytest.raises(CaseError, match="'expect' is the list"):
        normalize_http({"steps": [{"pg": {"send": ["Sync"]}, "expect": {}}]}, "x")
    with pytest.raises(PgStepError, match="unknown bare message"):
        encode_frontend("Synk")


def test_messages_are_written_and_read_as_the_protocol_has_them() -> None:
    assert encode_frontend("Sync") == b"S\0\0\0\4"
    assert encode_frontend({"Query": "SELECT 1"}) == b"Q\0\0\0\rSELECT 1\0"
    parse = encode_frontend({"Parse": {"name": "s", "sql": "SELECT $1", "types": [23]}})
    assert parse == b"P" + struct.pack("!i", 22) + b"s\0SELECT $1\0" + struct.pack("!hI", 1, 23)
    bind = encode_frontend({"Bind": {"statement": "s", "params": ["7", None]}})
    params = struct.pack("!i", 1) + b"7" + struct.pack("!i", -1)  # "7", then NULL
    assert bind[5:] == b"\0s\0" + struct.pack("!hhh", 1, 0, 2) + params + struct.pack("!h", 0)
    binary: list[bool] = []
    field = b"n\0" + struct.pack("!IhIhih", 0, 0, 23, 4, -1, 1)
    described = decode_backend(b"T", struct.pack("!h", 1) + field, binary)
    assert described == {
        "type": "RowDescription",
        "fields": [{"name": "n", "type_oid": 23, "format": 1}],
    }
    row = decode_backend(b"D", struct.pack("!hi", 1, 4) + b"\0\0\0\7", binary)
    assert row == {"type": "DataRow", "values": ["\\x00000007"]}
    assert decode_backend(b"S", b"a\0b\0", binary) is None

"""No client makes the server's log say what did not happen: each stderr line is one record
(or, in text, an indented line of a record's traceback), in both log formats, and no token
or ticket reaches a line, not even in SQL sent in the query string."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.http.request_log import (
    MAX_QUERY_LOGGED,
    redacted_query,
    redacted_text,
    shown_path,
)
from refimpl.log_format import escape_controls
from tests.http.conftest import Server, running_server

# The start of a text record: its time, as TEXT_FORMAT writes it.
RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")
FORGED = "2026-01-01 00:00:00,000 INFO GET /forged 200 0.1 ms (request forged)"


@pytest.fixture(scope="module", params=["text", "json"])
def logged(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    data = tmp_path_factory.mktemp(f"log_{request.param}") / "data"
    with running_server(data, "--log-format", request.param) as running:
        yield running


def _is_json(server: Server) -> bool:
    return "json" in list(server.process.args)  # type: ignore[arg-type]


def _records(server: Server, marker: str, timeout: float = 10.0) -> list[str]:
    """Every line of the server's stderr, once a line holding `marker` is written; each
    checked to be a record of the server's format."""
    deadline = time.monotonic() + timeout
    while marker not in server.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = server.log.read_text().splitlines()
    for line in lines:
        if _is_json(server):
            assert {"time", "level", "message"} <= json.loads(line).keys(), line
        else:
            assert RECORD_START.match(line) or line.startswith("  "), line
    return lines


def test_a_path_or_query_with_line_breaks_writes_one_record(logged: Server) -> None:
    marker = uuid.uuid4().hex
    for where in ("/x%0A", "/x%0D%0A", "/x%C2%85", "/x%E2%80%A8"):
        answer = logged.get(f"{where}{FORGED.replace(' ', '%20')}", token=None)
        assert answer.status_code == 404
    query = f"/health?m={marker}&a=%0A{FORGED.replace(' ', '%20')}"
    assert logged.get(query, token=None).status_code == 400  # /health takes no parameter
    lines = _records(logged, marker)
    assert not any(line.startswith(FORGED) for line in lines)  # forged, it would
    if not _is_json(logged):
        assert any(f"GET /x\\x0a{FORGED}" in line for line in lines)
    else:
        paths = [json.loads(line).get("path", "") for line in lines]
        assert f"/x\\x0a{FORGED}" in paths and f"/x\\u2028{FORGED}" in paths


def test_a_refused_drop_token_does_not_log_the_token(logged: Server) -> None:
    user = "u_" + uuid.uuid4().hex[:8]
    logged.sql(f"CREATE USER {user}")
    mine = logged.new_token(user)
    for statement in (f"DROP TOKEN '{logged.token}'", f"SELECT '{logged.token}' AS x"):
        refused = logged.get("/exec", params={"query": statement}, token=mine)
        assert refused.status_code == 403, refused.text
    marker = uuid.uuid4().hex
    logged.get("/health", params={"m": marker}, token=None)
    text = "\n".join(_records(logged, marker))
    assert logged.token not in text and mine not in text
    assert "DROP+TOKEN+'REDACTED'" in text and "SELECT+'REDACTED'+AS+x" in text
    assert logged.rows("SELECT 1") == [[1]]  # the admin's token still works: nothing dropped


def test_secrets_in_values_and_paths_are_redacted() -> None:
    token = "kdb_" + "A" * 43
    assert redacted_query(f"query=DROP%20TOKEN%20%27{token}%27&db=d") == (
        "query=DROP+TOKEN+'REDACTED'&db=d"
    )
    assert redacted_query("query=DROP+TOKEN+'it''s+any+text'") == "query=DROP+TOKEN+'REDACTED'"
    long = "a=" + "x" * (MAX_QUERY_LOGGED - 12)
    assert redacted_query(long + "&q=kdb_abcd1234567") == long + "&q=REDACTED..."  # cut in it
    assert redacted_query("q=kdb_short") == "q=kdb_short"  # no token: too short, not cut
    assert redacted_query("query=SELECT+kdb_rev()") == "query=SELECT+kdb_rev()"
    assert shown_path(f"/a/{token}/b") == "/a/REDACTED/b"
    assert redacted_text("kdbt_" + "b" * 43) == "REDACTED"


@given(st.text(max_size=40), st.text(alphabet="abcXYZ019_-", min_size=20, max_size=60))
def test_no_token_survives_redaction(around: str, body: str) -> None:
    for secret in ("kdb_" + body, "kdbt_" + body):
        text = around + secret + around
        assert secret not in redacted_text(text)


@given(st.text())
def test_escaped_text_is_one_line_and_keeps_printable_text(text: str) -> None:
    escaped = escape_controls(text)
    assert len(escaped.splitlines()) <= 1
    assert escape_controls("café /x?y=1") == "café /x?y=1"


def test_a_bad_regular_expression_is_a_clear_400_and_no_stray_line(logged: Server) -> None:
    """RE2 logs its errors to stderr by itself unless told not to: a line that is no record
    (and not JSON). Its message reaches the client as text, not as a bytes repr."""
    for pattern, reason in [("a(b", "missing ): a(b"), ("a{1001}", "invalid repetition size")]:
        answer = logged.exec(f"SELECT 'abc' ~ '{pattern}' AS m")
        assert answer.status_code == 400, answer.text
        message = answer.json()["error"]
        # As text: the bytes repr was `: b'missing ): a(b'`.
        assert message.startswith(f"invalid regular expression '{pattern}': {reason}")
    marker = uuid.uuid4().hex
    logged.get("/health", params={"m": marker}, token=None)
    text = "\n".join(_records(logged, marker))
    assert "re2.cc" not in text and "absl" not in text


def _refusals(server: Server, marker: str) -> list[str]:
    return [line for line in _records(server, marker) if "refused login from" in line]


def test_every_refused_login_is_a_line_with_the_client_and_never_the_secret(
    logged: Server,
) -> None:
    user = "u_" + uuid.uuid4().hex[:8]
    logged.sql(f"CREATE USER {user}")
    expiring = logged.rows(f"CREATE TOKEN FOR {user} EXPIRES IN '1s'")[0][0]
    wrong = "kdb_" + uuid.uuid4().hex + uuid.uuid4().hex[:11]
    first = uuid.uuid4().hex
    logged.get("/health", params={"m": first}, token=None)
    before = len(_refusals(logged, first))
    time.sleep(1.2)
    asked = [
        logged.get("/exec", params={"query": "SELECT 1"}, token=wrong),
        logged.get("/exec", params={"query": "SELECT 1"}, token=expiring),
        logged.get("/exec", headers={"Authorization": "Basic abc"}, token=None),
        logged.post("/api/session", data=wrong, token=None),
        logged.get("/stream/changes", params={"ticket": "kdbt_" + "x" * 43}, token=None),
        logged.get("/exec", headers={"Cookie": "kdb_session=nope"}, token=None),
    ]
    assert [answer.status_code for answer in asked] == [401] * 6
    marker = uuid.uuid4().hex
    logged.get("/health", params={"m": marker}, token=None)
    lines = _refusals(logged, marker)[before:]
    assert len(lines) == 6, lines
    text = "\n".join(lines)
    assert wrong not in text and expiring not in text and "kdbt_" not in text
    assert all("refused login from 127.0.0.1 with " in line for line in lines)
    credentials = ["a bearer token", "a bearer token", "a bearer token"]
    credentials += ["a token to open a session", "a stream ticket", "the session cookie"]
    for line, credential in zip(lines, credentials, strict=True):
        assert f"with {credential}" in line
    assert f"(user '{user}')" in lines[1] and "(user" not in lines[0]
    if _is_json(logged):
        fields = [json.loads(line) for line in lines]
        assert all(f["level"] == "warning" and f["client"] == "127.0.0.1" for f in fields)
        assert [f["user"] for f in fields] == [None, user, None, None, None, None]

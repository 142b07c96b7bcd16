"""JSON log lines with a request id that the answer sends back; no secret in any line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from refimpl.http.request_log import MAX_QUERY_LOGGED, RequestIds, redacted_query
from tests.http.conftest import Server, log_lines, running_server


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("jsonlog") / "data", "--log-format", "json"
    ) as running:
        yield running


def test_every_stderr_line_is_json(json_server: Server) -> None:
    json_server.get("/health")
    for line in Path(json_server.log).read_text().splitlines():
        entry = json.loads(line)
        assert {"time", "level", "logger", "message"} <= entry.keys()


def test_a_well_formed_client_id_is_kept_and_logged(json_server: Server) -> None:
    response = json_server.get(
        "/exec", params={"query": "SELECT 1"}, headers={"X-Request-Id": "client-42.a"}
    )
    assert response.headers["X-Request-Id"] == "client-42.a"
    [line] = log_lines(json_server, "client-42.a")
    assert line["status"] == 200 and line["method"] == "GET" and line["route"] == "/exec"
    assert line["path"] == "/exec" and line["duration_ms"] >= 0


@pytest.mark.parametrize("asked", ["has space", "x" * 65, "semi;colon", ""])
def test_a_malformed_client_id_is_replaced(json_server: Server, asked: str) -> None:
    response = json_server.get("/health", headers={"X-Request-Id": asked})
    made = response.headers["X-Request-Id"]
    assert made != asked and len(made) == 16
    assert log_lines(json_server, made)[0]["status"] == 200


def test_parked_answers_carry_their_id(json_server: Server) -> None:
    # A write's answer waits for its flush in the waiting room, and a reader's for a commit.
    json_server.sql("CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY)")
    response = json_server.post(
        "/exec", data=b"INSERT INTO t VALUES (1)", headers={"X-Request-Id": "write-1"}
    )
    assert response.status_code == 200 and response.headers["X-Request-Id"] == "write-1"
    asked = {"table": "t", "format": "json", "wait": 300}
    lsn = json_server.get("/api/changes", params=asked).json()["next"]
    waited = json_server.get(
        "/api/changes", params={**asked, "from": lsn}, headers={"X-Request-Id": "reader-1"}
    )
    assert waited.headers["X-Request-Id"] == "reader-1"
    [line] = log_lines(json_server, "reader-1")
    assert line["status"] == 200 and line["duration_ms"] >= 250


def test_errors_are_logged_with_their_status(json_server: Server) -> None:
    response = json_server.exec("SELEC 1")
    assert response.status_code == 400
    [line] = log_lines(json_server, response.headers["X-Request-Id"])
    assert line["status"] == 400


def test_no_token_or_ticket_in_any_line(json_server: Server) -> None:
    secret = "kdb_secret_value_never_logged"
    response = json_server.get(
        "/api/changes", token=None, params={"table": "t", "token": secret, "ticket": secret}
    )
    json_server.get("/health", headers={"Authorization": f"Bearer {secret}"})
    [line] = log_lines(json_server, response.headers["X-Request-Id"])
    assert "token=REDACTED" in line["query"] and "ticket=REDACTED" in line["query"]
    text = json_server.log.read_text()
    assert secret not in text and json_server.token not in text


@given(st.text(max_size=80))
def test_request_ids_are_always_safe_header_values(asked: str) -> None:
    made = RequestIds()(asked)
    assert 1 <= len(made) <= 64
    assert all(c.isascii() and (c.isalnum() or c in "._:-") for c in made)
    assert (made == asked) or len(made) == 16


def test_new_request_ids_differ() -> None:
    ids = RequestIds()
    made = {ids(None) for _ in range(10_000)}
    assert len(made) == 10_000 and all(len(one) == 16 for one in made)


def test_an_escaped_name_is_redacted_too() -> None:
    assert redacted_query("%74oken=kdb_x&table=t") == "token=REDACTED&table=t"


def test_a_piece_shown_before_is_shown_as_its_cut_says() -> None:
    # The pieces' lines are remembered: the same piece whole, then cut short at the end of
    # a token's start, is shown as each asks, and a repeated one the same every time.
    piece = "q=" + "+" * (MAX_QUERY_LOGGED - len("x=1&q=kdb_ab")) + "kdb_ab"
    whole = f"x=1&{piece}"
    assert len(whole) == MAX_QUERY_LOGGED
    for _ in range(2):
        assert redacted_query(whole) == whole
        shown = redacted_query(whole + "&wait=5")
        assert shown.endswith("REDACTED...") and "kdb_ab" not in shown


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["token", "TOKEN", "ticket", "table", "from"]), st.text(max_size=20)
        ),
        max_size=6,
    )
)
def test_redaction_leaves_no_secret_value(pairs: list[tuple[str, str]]) -> None:
    from urllib.parse import parse_qsl, urlencode

    assume(len(urlencode(pairs)) <= MAX_QUERY_LOGGED - 100)  # not cut: every pair is shown
    shown = parse_qsl(redacted_query(urlencode(pairs)), keep_blank_values=True)
    for (name, value), (shown_name, shown_value) in zip(pairs, shown, strict=True):
        assert shown_name == name
        if name.lower() in ("token", "ticket"):
            assert shown_value == "REDACTED"
        else:
            assert shown_value == value

"""`/exec` asked again on its connection with the same head but another statement (the
reader takes it without the parser, and the app dispatches it as the first): the same
answers and log lines as requests parsed in full, and the token, the rights and the database
checked at each."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.http.conftest import Server, running_server
from tests.http.keepalive import TAKEN, KeepAlive, assert_logged, take_away, user_database


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("exec") / "data", "--log-format", "json") as up:
        yield up


class Client(KeepAlive):
    """One keep-alive connection sending each statement with the same head."""

    def __init__(self, server: Server, db: str, token: str) -> None:
        super().__init__(server)
        self.head = (
            f"POST /exec?db={db} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: text/plain\r\n"
            "Content-Length: %d\r\n\r\n"
        ).encode()

    def ask(self, sql: str) -> tuple[int, dict[str, str], dict]:
        body = sql.encode()
        self.send(self.head % len(body) + body)
        status, headers, answer = self.answer()
        return status, headers, json.loads(answer)


def _database(server: Server) -> tuple[str, str, str]:
    """A new database with a table, a user who may write it, and their token."""
    return user_database(server, "x_", ["READ", "WRITE"])


def test_repeated_statements_answer_and_log_as_parsed_ones(json_server: Server) -> None:
    server = json_server
    db, _, token = _database(server)
    client = Client(server, db, token)
    seen = []
    try:
        for n in range(1, 5):  # a write (answered once durable), then a read, each time
            status, headers, body = client.ask(f"INSERT INTO t VALUES ({n}, {n * 10})")
            assert status == 200, body
            seen.append(headers["x-request-id"])
            status, headers, body = client.ask(f"SELECT v FROM t WHERE id = {n}")
            assert status == 200 and body["dataset"] == [[n * 10]], body
            seen.append(headers["x-request-id"])
        status, _, body = client.ask("SELECT nothing FROM t")
        assert status == 400 and "error" in body
        status, _, body = client.ask("SELECT count(*) AS n FROM t")
        assert status == 200 and body["dataset"] == [[4]]
    finally:
        client.close()
    assert len(set(seen)) == len(seen)
    for request_id in seen:
        assert_logged(server, request_id, "POST", "/exec", f"db={db}")


@pytest.mark.parametrize("change", TAKEN)
def test_a_repeated_statement_is_checked_again(json_server: Server, change: str) -> None:
    server = json_server
    db, user, token = _database(server)
    client = Client(server, db, token)
    try:
        for n in (1, 2):
            status, _, body = client.ask(f"INSERT INTO t VALUES ({n}, 0)")
            assert status == 200, body
        refused = take_away(server, change, db, user, token, "WRITE")
        status, _, body = client.ask("INSERT INTO t VALUES (3, 0)")
        assert status == refused
        assert "error" in body
        if change == "REVOKE":  # still a reader
            status, _, body = client.ask("SELECT count(*) AS n FROM t")
            assert status == 200 and body["dataset"] == [[2]], body
    finally:
        client.close()

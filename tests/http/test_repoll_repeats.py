"""A long poll asked again on its connection, the same head but a new id (the reader takes
it without the parser): the same answers, log lines, and checks of the token, the rights
and the database as a request parsed in full."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.http.conftest import Server, running_server
from tests.http.keepalive import TAKEN, KeepAlive, assert_logged, take_away, user_database


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("repeats") / "data", "--log-format", "json"
    ) as running:
        yield running


QUERY = "SUBSCRIBE SELECT id, v FROM t ORDER BY id"


class Poller(KeepAlive):
    """One keep-alive connection sending the same head each time but its id."""

    def __init__(
        self, server: Server, db: str, token: str, query: str = QUERY, extra: str = ""
    ) -> None:
        super().__init__(server)
        self.query = quote(query)
        self.db, self.token = db, token
        self.extra = extra  # more of the query string, after the wait

    def ask(self, ident: str, wait: int = 0) -> tuple[int, dict[str, str], str]:
        self.poll(ident, wait)
        return self.text()

    def poll(self, ident: str, wait: int) -> None:
        self.send(
            f"GET /api/subscribe?db={self.db}&query={self.query}&id={ident}&wait={wait}"
            f"{self.extra} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )

    def text(self) -> tuple[int, dict[str, str], str]:
        status, headers, body = self.answer()
        return status, headers, body.decode()


def _event(body: str) -> tuple[str, str, dict]:
    ident = kind = ""
    data: dict = {}
    for line in body.splitlines():
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
    return ident, kind, data


def _database(server: Server) -> tuple[str, str, str]:
    """A new database with a table of one row, a user who may read it, and their token."""
    return user_database(server, "t_", ["READ"], ["INSERT INTO t VALUES (1, 10)"])


def _snapshot(server: Server, db: str, token: str, query: str = QUERY, **more: str) -> str:
    response = server.get("/api/subscribe", params={"db": db, "query": query, **more}, token=token)
    assert response.status_code == 200, response.text
    return _event(response.text)[0]


def test_repeated_polls_answer_and_log_as_parsed_ones(json_server: Server) -> None:
    server = json_server
    db, _, token = _database(server)
    ident = _snapshot(server, db, token)
    poller = Poller(server, db, token)
    try:
        seen = []
        for n in range(2, 6):
            # Answered at once, or parked until the commit (its answer sent by the server).
            wait = 0 if n % 2 else 10_000
            if wait:
                poller.poll(ident, wait)
            server.sql(f"INSERT INTO t VALUES ({n}, {n * 10})", db)
            status, headers, body = poller.text() if wait else poller.ask(ident)
            assert status == 200, body
            new, kind, data = _event(body)
            assert kind == "rows" and data["rows"] == [[n, n * 10]], body
            assert new.rsplit(".", 1)[0] == ident.rsplit(".", 1)[0]
            seen.append((ident, headers["x-request-id"]))
            ident = new
        status, _, body = poller.ask(ident)  # nothing new: the id to ask again with
        assert status == 200 and _event(body)[:2] == (ident, "")
    finally:
        poller.close()
    for (asked, request_id), wait in zip(seen, (10_000, 0, 10_000, 0), strict=True):
        query = f"db={db}&query={poller.query}&id={asked}&wait={wait}"
        assert_logged(server, request_id, "GET", "/api/subscribe", query)


@pytest.mark.parametrize("change", TAKEN)
def test_a_repeated_poll_is_checked_again(json_server: Server, change: str) -> None:
    server = json_server
    db, user, token = _database(server)
    ident = _snapshot(server, db, token)
    poller = Poller(server, db, token)
    try:
        for n in (2, 3):
            server.sql(f"INSERT INTO t VALUES ({n}, 0)", db)
            status, _, body = poller.ask(ident)
            assert status == 200, body
            ident = _event(body)[0]
        refused = take_away(server, change, db, user, token, "READ")
        status, _, body = poller.ask(ident)
        assert status == refused
        assert "error" in json.loads(body)
    finally:
        poller.close()


def test_a_repeated_polls_parameters_are_its_first_requests(json_server: Server) -> None:
    # The route keeps what it made of a poll's parameters for its repeats: offsets=true at
    # each of them (every answer has its moves), a wrong one refused at each of them.
    server = json_server
    db, _, token = _database(server)
    query = "SUBSCRIBE SELECT id, v FROM t ORDER BY v DESC LIMIT 3"
    ident = _snapshot(server, db, token, query, offsets="true")
    poller = Poller(server, db, token, query, "&offsets=true")
    try:
        for n in range(2, 5):
            server.sql(f"INSERT INTO t VALUES ({n}, {n * 10})", db)
            status, _, body = poller.ask(ident)
            new, kind, data = _event(body)
            assert (status, kind) == (200, "rows"), body
            # The new row, the largest v, comes first.
            assert {"old_offset": None, "new_offset": 0, "row": [n, n * 10]} in data["moves"]
            ident = new
    finally:
        poller.close()
    poller = Poller(server, db, token, query, "&offsets=maybe")
    try:
        for _ in range(3):
            status, _, body = poller.ask(ident)
            assert status == 400 and "offsets" in json.loads(body)["error"], body
    finally:
        poller.close()

"""A long poll asked again on its connection, the same head but a new id (the reader takes
it without the parser): the same answers, log lines, and checks of the token, the rights
and the database as a request parsed in full."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.http.conftest import Server, log_lines, running_server


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(
        tmp_path_factory.mktemp("repeats") / "data", "--log-format", "json"
    ) as running:
        yield running


QUERY = "SUBSCRIBE SELECT id, v FROM t ORDER BY id"


class Poller:
    """One keep-alive connection sending the same head each time but its id."""

    def __init__(
        self, server: Server, db: str, token: str, query: str = QUERY, extra: str = ""
    ) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.query = quote(query)
        self.db, self.token, self.host = db, token, f"{host}:{port}"
        self.extra = extra  # more of the query string, after the wait
        self.buffer = b""

    def ask(self, ident: str, wait: int = 0) -> tuple[int, dict[str, str], str]:
        self.send(ident, wait)
        return self.answer()

    def send(self, ident: str, wait: int) -> None:
        self.sock.sendall(
            f"GET /api/subscribe?db={self.db}&query={self.query}&id={ident}&wait={wait}"
            f"{self.extra} HTTP/1.1\r\nHost: {self.host}\r\nAuthorization: Bearer {self.token}\r\n"
            "Content-Length: 0\r\n\r\n".encode()
        )

    def answer(self) -> tuple[int, dict[str, str], str]:
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(65536)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:])
        }
        size = int(headers["content-length"])
        while len(self.buffer) < size:
            self.buffer += self.sock.recv(65536)
        body, self.buffer = self.buffer[:size], self.buffer[size:]
        return int(lines[0].split()[1]), headers, body.decode()

    def close(self) -> None:
        self.sock.close()


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
    """A new database with a table, a user who may read it, and their token."""
    db = "t_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {db}")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 10)", db)
    user = "u_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE USER {user}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO {user}", db)
    return db, user, server.rows(f"CREATE TOKEN FOR {user}", db)[0][0]


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
                poller.send(ident, wait)
            server.sql(f"INSERT INTO t VALUES ({n}, {n * 10})", db)
            status, headers, body = poller.answer() if wait else poller.ask(ident)
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
        [line] = log_lines(server, request_id)
        assert (line["method"], line["path"], line["route"], line["status"]) == (
            "GET",
            "/api/subscribe",
            "/api/subscribe",
            200,
        )
        assert line["query"] == f"db={db}&query={poller.query}&id={asked}&wait={wait}"


@pytest.mark.parametrize("change", ["REVOKE", "DROP TOKEN", "DROP USER", "DROP DATABASE"])
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
        statement = {
            "REVOKE": f"REVOKE READ ON DATABASE {db} FROM {user}",
            "DROP TOKEN": f"DROP TOKEN '{token}'",
            "DROP USER": f"DROP USER {user}",
            "DROP DATABASE": f"DROP DATABASE {db}",
        }[change]
        server.sql(statement, "demo" if change == "DROP DATABASE" else db)
        status, _, body = poller.ask(ident)
        # A token no longer good: 401; no right in the database (and whether it is there is
        # not told): 403.
        assert status == (401 if change.startswith("DROP T") or change == "DROP USER" else 403)
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

"""`/exec` asked again on its connection with the same head but another statement (the
reader takes it without the parser, and the app dispatches it as the first): the same
answers and log lines as requests parsed in full, and the token, the rights and the database
checked at each."""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator

import pytest

from tests.http.conftest import Server, log_lines, running_server


@pytest.fixture(scope="module")
def json_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("exec") / "data", "--log-format", "json") as up:
        yield up


class Client:
    """One keep-alive connection sending each statement with the same head."""

    def __init__(self, server: Server, db: str, token: str) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.head = (
            f"POST /exec?db={db} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {token}\r\nContent-Type: text/plain\r\n"
            "Content-Length: %d\r\n\r\n"
        ).encode()
        self.buffer = b""

    def ask(self, sql: str) -> tuple[int, dict[str, str], dict]:
        body = sql.encode()
        self.sock.sendall(self.head % len(body) + body)
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
        answer, self.buffer = self.buffer[:size], self.buffer[size:]
        return int(lines[0].split()[1]), headers, json.loads(answer)

    def close(self) -> None:
        self.sock.close()


def _database(server: Server) -> tuple[str, str, str]:
    """A new database with a table, a user who may write it, and their token."""
    db = "x_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {db}")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    user = "u_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE USER {user}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO {user}", db)
    server.sql(f"GRANT WRITE ON DATABASE {db} TO {user}", db)
    return db, user, server.rows(f"CREATE TOKEN FOR {user}", db)[0][0]


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
        [line] = log_lines(server, request_id)
        assert (line["method"], line["path"], line["route"], line["status"]) == (
            "POST",
            "/exec",
            "/exec",
            200,
        )
        assert line["query"] == f"db={db}"


@pytest.mark.parametrize("change", ["REVOKE", "DROP TOKEN", "DROP USER", "DROP DATABASE"])
def test_a_repeated_statement_is_checked_again(json_server: Server, change: str) -> None:
    server = json_server
    db, user, token = _database(server)
    client = Client(server, db, token)
    try:
        for n in (1, 2):
            status, _, body = client.ask(f"INSERT INTO t VALUES ({n}, 0)")
            assert status == 200, body
        statement = {
            "REVOKE": f"REVOKE WRITE ON DATABASE {db} FROM {user}",
            "DROP TOKEN": f"DROP TOKEN '{token}'",
            "DROP USER": f"DROP USER {user}",
            "DROP DATABASE": f"DROP DATABASE {db}",
        }[change]
        server.sql(statement, "demo" if change == "DROP DATABASE" else db)
        status, _, body = client.ask("INSERT INTO t VALUES (3, 0)")
        # A token no longer good: 401; no right to write (or none in the database): 403.
        assert status == (401 if change.startswith("DROP T") or change == "DROP USER" else 403)
        assert "error" in body
        if change == "REVOKE":  # still a reader
            status, _, body = client.ask("SELECT count(*) AS n FROM t")
            assert status == 200 and body["dataset"] == [[2]], body
    finally:
        client.close()

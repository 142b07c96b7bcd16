"""What the tests of a client's repeated requests over a real server share: one raw
keep-alive connection reading whole answers off its socket, a database with a user of given
rights, the change that takes a right away, and the check of each request's one log line."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Sequence

from tests.http.conftest import Server, log_lines

# What takes a user's right away, one way each: `take_away` makes the change.
TAKEN = ["REVOKE", "DROP TOKEN", "DROP USER", "DROP DATABASE"]


class KeepAlive:
    """One keep-alive connection to `server`: `send` writes a request's bytes, `answer`
    reads the next whole answer (framed by its Content-Length), keeping what came after it
    for the next call."""

    def __init__(self, server: Server) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        self.host = f"{host}:{port}"
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> tuple[int, dict[str, str], bytes]:
        """The status, the header fields (names in lower case) and the body."""
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
        return int(lines[0].split()[1]), headers, body

    def close(self) -> None:
        self.sock.close()


def user_database(
    server: Server, prefix: str, rights: Sequence[str], setup: Sequence[str] = ()
) -> tuple[str, str, str]:
    """A new database (its name `prefix` and random hex) with a table `t (id INT PRIMARY
    KEY, v INT)` and the statements of `setup` run in it, a new user holding `rights` on it,
    and their token."""
    db = prefix + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {db}")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    for statement in setup:
        server.sql(statement, db)
    user = "u_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE USER {user}", db)
    for right in rights:
        server.sql(f"GRANT {right} ON DATABASE {db} TO {user}", db)
    return db, user, server.new_token(user, db)


def take_away(server: Server, change: str, db: str, user: str, token: str, right: str) -> int:
    """Make the change of `TAKEN` named `change` (`REVOKE` revokes `right`), and answer the
    status a request of that user then gets: 401 for a token no longer good, 403 for no
    right in the database (whether it is there is not told)."""
    statement = {
        "REVOKE": f"REVOKE {right} ON DATABASE {db} FROM {user}",
        "DROP TOKEN": f"DROP TOKEN '{token}'",
        "DROP USER": f"DROP USER {user}",
        "DROP DATABASE": f"DROP DATABASE {db}",
    }[change]
    server.sql(statement, "demo" if change == "DROP DATABASE" else db)
    return 401 if change in ("DROP TOKEN", "DROP USER") else 403


def assert_logged(server: Server, request_id: str, method: str, path: str, query: str) -> None:
    """The request `request_id` has one log line, of a 200 to `method` `path` (its route)
    with the query string `query`."""
    [line] = log_lines(server, request_id)
    assert (line["method"], line["path"], line["route"], line["status"]) == (
        method,
        path,
        path,
        200,
    )
    assert line["query"] == query

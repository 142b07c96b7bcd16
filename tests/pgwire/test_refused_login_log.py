"""Every refused login on the PostgreSQL port is a line of the server's log, as over HTTP:
the client's address and the user it named, never the password (the token); with
`--log-format json` one JSON object with the fields `client`, `credential` and `user`."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.http.conftest import Server, running_server
from tests.pgwire.attack import read_until_closed
from tests.pgwire.conftest import PgServer, pg_address


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    folder = tmp_path_factory.mktemp("pg-login-log")
    with running_server(folder / "data", "--pg-port", "0", "--log-format", "json") as running:
        yield PgServer(running, *pg_address(running))


def refusals(server: Server, count: int) -> list[dict]:
    """The log's refused-login records, once there are `count` (they are written at once,
    the file may lag a moment)."""
    deadline = time.monotonic() + 10
    while True:
        records = [json.loads(line) for line in Path(server.log).read_text().splitlines() if line]
        found = [r for r in records if r["message"].startswith("refused login from")]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_each_refused_login_is_logged_without_the_secret(pg: PgServer) -> None:
    pg.http.sql("CREATE USER reader")
    reader_token = pg.http.new_token("reader")
    wrong = "kdb_" + "w" * 43
    with pytest.raises(psycopg.OperationalError):
        pg.connect(password=wrong)  # as admin, an unknown token
    with pytest.raises(psycopg.OperationalError):
        pg.connect(user="admin", password=reader_token)  # another user's token
    # A startup without a user name.
    with socket.create_connection((pg.host, pg.port), timeout=10) as sock:
        body = struct.pack("!i", 196608) + b"database\0demo\0\0"
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        assert b"28000" in read_until_closed(sock)
    found = refusals(pg.http, 3)
    assert len(found) == 3, found
    for record in found:
        assert record["level"] == "warning" and record["logger"] == "refimpl.auth"
        assert record["client"] == "127.0.0.1" and record["credential"] == "a PostgreSQL password"
    assert [r["user"] for r in found] == ["admin", "admin", None]
    assert "the token belongs to user 'reader'" in found[1]["message"]
    text = Path(pg.http.log).read_text()
    assert wrong not in text and reader_token not in text
    with pg.connect() as conn:  # a right token still logs in, and adds no such line
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert len(refusals(pg.http, 4)) == 3

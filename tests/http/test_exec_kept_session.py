"""`/exec` keeps a connection's engine session for the requests it repeats with the same
head (`sql_routes._session`): a request still runs in a session a new one would be, in the
database its name stands for now and with nothing of the requests before it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.http.conftest import Server, running_server
from tests.http.keepalive import KeepAlive


@pytest.fixture(scope="module")
def dev_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A `--dev` server: every request acts as the one admin principal, whatever changes."""
    with running_server(tmp_path_factory.mktemp("kept") / "data", "--dev") as up:
        yield up


class Client(KeepAlive):
    """One keep-alive connection sending each statement with the same head."""

    def __init__(self, server: Server, db: str) -> None:
        super().__init__(server)
        self.head = (
            f"POST /exec?db={db} HTTP/1.1\r\nHost: {self.host}\r\n"
            "Content-Type: text/plain\r\nContent-Length: %d\r\n\r\n"
        ).encode()

    def ask(self, sql: str) -> tuple[int, dict]:
        body = sql.encode()
        self.send(self.head % len(body) + body)
        status, _, answer = self.answer()
        return status, json.loads(answer)


def test_a_database_made_again_is_the_one_read(dev_server: Server) -> None:
    server = dev_server
    server.sql("CREATE DATABASE again")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", "again")
    client = Client(server, "again")
    try:
        for n in (1, 2):
            status, body = client.ask(f"INSERT INTO t VALUES ({n})")
            assert status == 200, body
        status, body = client.ask("SELECT count(*) AS n FROM t")
        assert (status, body["dataset"]) == (200, [[2]]), body
        server.sql("DROP DATABASE again")
        server.sql("CREATE DATABASE again")
        server.sql("CREATE TABLE t (id INT PRIMARY KEY)", "again")
        status, body = client.ask("SELECT count(*) AS n FROM t")
        assert (status, body["dataset"]) == (200, [[0]]), body
        status, body = client.ask("INSERT INTO t VALUES (7)")
        assert status == 200, body
        assert server.rows("SELECT id FROM t", "again") == [[7]]
    finally:
        client.close()


def test_nothing_of_a_request_is_left_to_the_next(dev_server: Server) -> None:
    server = dev_server
    server.sql("CREATE TABLE left_over (id INT PRIMARY KEY)")
    client = Client(server, "demo")
    try:
        # A transaction left open by its script is rolled back at the request's end.
        status, body = client.ask("BEGIN; INSERT INTO left_over VALUES (1)")
        assert status == 200, body
        status, body = client.ask("SELECT count(*) AS n FROM left_over")
        assert (status, body["dataset"]) == (200, [[0]]), body
        # A cursor held past its commit is the request's own.
        status, body = client.ask("BEGIN; DECLARE c CURSOR WITH HOLD FOR SELECT 1 AS one; COMMIT")
        assert status == 200, body
        status, body = client.ask("FETCH NEXT FROM c")
        assert status == 400 and "does not exist" in body["error"], body
        status, body = client.ask("SELECT count(*) AS n FROM left_over")
        assert (status, body["dataset"]) == (200, [[0]]), body
    finally:
        client.close()

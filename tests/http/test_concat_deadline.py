"""Nested `||` over a long text stops at the statement timeout, over HTTP (400 naming
`statement_timeout_ms`) and the PostgreSQL protocol (57014), and changes nothing.

`s || s || ... || s` of 120 terms over a 300 KB text copies ever longer texts (the last one
36 MB, 2 GB copied in all), and twenty of them in one row's select list take many seconds in
one row, where the scans' checks between rows never come. Each `||` of long texts asks the
statement's deadline first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from psycopg import errors

from tests.http.conftest import Server, timed_server
from tests.pgwire.conftest import PgServer, pg_address

TIMEOUT_MS = 2000
TEXT = "a" * 300_000
CHAIN = " || ".join(["s"] * 120)  # under the parser's 200 levels of nesting
# Twenty chains (about 40 GB copied) take far longer than the timeout on a fast, quiet
# machine too: six were done within it there, and the INSERT committed.
LENGTHS = ", ".join(f"length({CHAIN}) AS n{i}" for i in range(20))
SUM_OF_LENGTHS = " + ".join([f"length({CHAIN})"] * 20)
# Generous for a loaded machine; the same statement without the checks runs far longer.
ANSWERED_WITHIN = 3 * TIMEOUT_MS / 1000


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with timed_server(tmp_path_factory.mktemp("concat"), TIMEOUT_MS, "--pg-port", "0") as running:
        host, port = pg_address(running)
        found = PgServer(running, host, port)
        with found.connect() as conn:
            conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
            conn.execute("CREATE TABLE u (id INT PRIMARY KEY, n INT)")
            conn.execute("INSERT INTO t VALUES (1, %s)", (TEXT,))  # a parameter: no parse
        yield found


def test_nested_concatenation_answers_the_timeout_over_http(pg: PgServer) -> None:
    server: Server = pg.http
    for sql in (
        f"SELECT {LENGTHS} FROM t",
        f"INSERT INTO u SELECT id, {SUM_OF_LENGTHS} FROM t",
    ):
        started = time.monotonic()
        answer = server.exec(sql)
        seconds = time.monotonic() - started
        assert answer.status_code == 400, answer.text
        assert "statement_timeout_ms" in answer.json()["error"]
        assert seconds < ANSWERED_WITHIN
    assert server.rows("SELECT count(*) AS n FROM u") == [[0]]
    assert server.rows("SELECT length(s) AS n FROM t") == [[len(TEXT)]]
    assert server.get("/health", token=None).status_code == 200
    assert "Traceback" not in server.log.read_text()


def test_nested_concatenation_is_57014_over_the_postgresql_protocol(pg: PgServer) -> None:
    with pg.connect() as conn:
        started = time.monotonic()
        with pytest.raises(errors.QueryCanceled) as refused:
            conn.execute(f"SELECT {LENGTHS} FROM t")
        assert time.monotonic() - started < ANSWERED_WITHIN
        assert refused.value.sqlstate == "57014"
        assert "statement_timeout_ms" in str(refused.value)
        assert conn.execute("SELECT count(*) FROM u").fetchone() == (0,)


def test_a_short_nested_concatenation_answers(pg: PgServer) -> None:
    rows = pg.http.rows("SELECT length(s || '-' || s) AS n, 'a' || 'b' || 'c' AS t FROM t")
    assert rows == [[2 * len(TEXT) + 1, "abc"]]

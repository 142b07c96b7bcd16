"""One LIKE over a long text stops at the statement timeout, over HTTP (400 naming
`statement_timeout_ms`) and the PostgreSQL protocol (57014), and changes nothing.

Its worst case is what a client chooses the sizes of (`tests.http.costly_like`: seconds of
work for one row, without the deadline).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from psycopg import errors

from tests.http.conftest import Server, timed_server
from tests.http.costly_like import PATTERN, TEXT
from tests.pgwire.conftest import PgServer, pg_address

TIMEOUT_MS = 500


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with timed_server(tmp_path_factory.mktemp("like"), TIMEOUT_MS, "--pg-port", "0") as running:
        host, port = pg_address(running)
        found = PgServer(running, host, port)
        with found.connect() as conn:
            conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
            conn.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING)")
            conn.execute("INSERT INTO t VALUES (1, %s)", (TEXT,))  # a parameter: no parse
        yield found


def test_a_costly_like_answers_the_timeout_over_http(pg: PgServer) -> None:
    server: Server = pg.http
    for sql in (
        f"SELECT count(*) AS n FROM t WHERE s LIKE '{PATTERN}'",
        f"INSERT INTO u SELECT id, s FROM t WHERE s NOT LIKE '{PATTERN}'",
    ):
        started = time.monotonic()
        answer = server.exec(sql)
        seconds = time.monotonic() - started
        assert answer.status_code == 400, answer.text
        assert "statement_timeout_ms" in answer.json()["error"]
        assert seconds < 10 * TIMEOUT_MS / 1000
    assert server.rows("SELECT count(*) AS n FROM u") == [[0]]
    assert server.rows("SELECT length(s) AS n FROM t") == [[len(TEXT)]]
    assert "Traceback" not in server.log.read_text()


def test_a_costly_like_is_57014_over_the_postgresql_protocol(pg: PgServer) -> None:
    with pg.connect() as conn:
        with pytest.raises(errors.QueryCanceled) as refused:
            conn.execute("SELECT count(*) AS n FROM t WHERE s LIKE %s", (PATTERN,))
        assert refused.value.sqlstate == "57014"
        assert "statement_timeout_ms" in str(refused.value)
        assert conn.execute("SELECT count(*) FROM u").fetchone() == (0,)


def test_a_cheap_like_over_the_same_text_answers(pg: PgServer) -> None:
    assert pg.http.rows("SELECT count(*) AS n FROM t WHERE s LIKE '%a_a_a%'") == [[1]]

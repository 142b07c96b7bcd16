"""Texts of 1 to 4 statements sent as one simple `Query`, an error at a random place in
most of them, against PostgreSQL 15: afterwards the table another connection reads and the
transaction status of the `ReadyForQuery` are the same on both (spec/pgwire.md, "Queries":
one implicit transaction, an error undoes the statements before it; BEGIN, COMMIT and
ROLLBACK among them as PostgreSQL takes them)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.differential.session import servers
from tests.pgwire.conftest import pg_address

TABLE = "CREATE TABLE t (id INT PRIMARY KEY, v INT)"
# Statements that succeed whatever the table holds (an INSERT's key is new to it).
GOOD = st.one_of(
    st.integers(1, 9).map(lambda k: f"INSERT INTO t VALUES ({k * 1000 + 1}, {k})"),
    st.integers(1, 9).map(lambda k: f"UPDATE t SET v = v + {k} WHERE id > 5"),
    st.integers(1, 9).map(lambda k: f"DELETE FROM t WHERE v = {k}"),
    st.just("SELECT count(*) FROM t"),
)
# Statements that fail when they run (the text has parsed): a key taken, a column or a
# table unknown; and one no parse takes, which runs no statement of its text.
BAD = st.sampled_from(
    [
        "INSERT INTO t VALUES (1, 0)",
        "SELECT nope FROM t",
        "SELECT * FROM missing",
        "UPDATE t SET id = 2 WHERE id = 3",
        "SELEC 1",
    ]
)
# One of these at most in a text: a second BEGIN is PostgreSQL's warning, refimpl's error.
CONTROL = st.sampled_from(["BEGIN", "COMMIT", "ROLLBACK"])


@st.composite
def texts(draw: st.DrawFn) -> list[str]:
    statements = draw(st.lists(GOOD, min_size=0, max_size=3))
    for extra in (draw(st.none() | CONTROL), draw(st.none() | BAD)):
        if extra is not None:
            statements.insert(draw(st.integers(0, len(statements))), extra)
    return statements or [draw(GOOD)]


@dataclass
class Side:
    """One server's connection that sends the texts and one that reads what is committed."""

    sender: psycopg.Connection
    reader: psycopg.Connection

    def send(self, text: str) -> str:
        """Send `text` as one Query; the status its ReadyForQuery told."""
        try:
            self.sender.execute(text.encode())  # bytes: no parameters, one simple Query
        except psycopg.Error:
            pass
        return self.sender.info.transaction_status.name

    def committed(self) -> list[tuple]:
        return self.reader.execute("SELECT id, v FROM t ORDER BY id").fetchall()

    def reset(self) -> None:
        if self.sender.info.transaction_status.name != "IDLE":
            self.sender.execute("ROLLBACK")
        self.reader.execute("DELETE FROM t")
        self.reader.execute("INSERT INTO t VALUES (1, 1), (3, 3), (5, 5), (7, 7)")


@contextmanager
def sides() -> Iterator[tuple[Side, Side]]:
    with servers() as (postgres, why, refimpl_server):
        if postgres is None or refimpl_server is None:
            pytest.skip(f"no PostgreSQL 15 to compare with: {why}")
        name = "diff_" + uuid.uuid4().hex[:10]
        refimpl_server.sql(f"CREATE DATABASE {name}")
        host, port = pg_address(refimpl_server)

        def ours() -> psycopg.Connection:
            return psycopg.connect(
                host=host,
                port=port,
                user="admin",
                password=refimpl_server.token,
                dbname=name,
                autocommit=True,
            )

        opened = [postgres.connect(), postgres.connect(), ours(), ours()]
        try:
            theirs, mine = Side(*opened[:2]), Side(*opened[2:])
            for side in (theirs, mine):
                side.reader.execute(TABLE)
            yield theirs, mine
        finally:
            for conn in opened:
                conn.close()


def test_a_text_is_one_transaction_here_as_there() -> None:
    with sides() as (theirs, mine):
        seen: list[tuple[str, str]] = []

        @settings(
            max_examples=80,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(statements=texts())
        def check(statements: list[str]) -> None:
            text = "; ".join(statements)
            theirs.reset()
            mine.reset()
            pg, ref = theirs.send(text), mine.send(text)
            assert (ref, mine.committed()) == (pg, theirs.committed()), text
            seen.append((pg, text))

        check()
        statuses = {status for status, _ in seen}
        assert statuses == {"IDLE", "INTRANS", "INERROR"}, seen  # every case drawn

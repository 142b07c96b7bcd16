"""A subquery used as a value that answers more than one row is refused as PostgreSQL 15
refuses it: SQLSTATE 21000 (cardinality_violation) over the protocol, the same sentence in
a 400 over HTTP. A real server, a real driver."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest

from tests.http.conftest import running_server
from tests.pgwire.conftest import PgServer, pg_address

SENTENCE = "more than one row returned by a subquery used as an expression"
STATEMENTS = [
    "SELECT (SELECT id FROM t) AS one",
    "SELECT id FROM t WHERE id = (SELECT id FROM t WHERE id > 0)",
    "SELECT v FROM t GROUP BY v HAVING v > (SELECT v FROM t)",
    "SELECT id, (SELECT v FROM t AS u WHERE u.id >= t.id) AS w FROM t ORDER BY id",
]


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with running_server(tmp_path_factory.mktemp("pg") / "data", "--pg-port", "0") as running:
        yield PgServer(running, *pg_address(running))


@pytest.fixture(scope="module")
def db(pg: PgServer) -> str:
    name = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {name}")
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", name)
    pg.http.sql("INSERT INTO t VALUES (1, 10), (2, 20)", name)
    return name


@pytest.mark.parametrize("sql", STATEMENTS)
def test_over_the_protocol_it_is_21000(pg: PgServer, db: str, sql: str) -> None:
    with pg.connect(db) as conn:
        with pytest.raises(psycopg.errors.CardinalityViolation) as raised:
            conn.execute(sql)
        assert raised.value.sqlstate == "21000"
        assert str(raised.value).startswith(SENTENCE), str(raised.value)
        assert "2 rows" in str(raised.value)
        assert conn.execute("SELECT 1").fetchall() == [(1,)]  # the connection goes on


@pytest.mark.parametrize("sql", STATEMENTS)
def test_over_http_it_is_a_400_with_the_same_sentence(pg: PgServer, db: str, sql: str) -> None:
    response = pg.http.exec(sql, db)
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(SENTENCE)


def test_one_row_or_none_is_a_value(pg: PgServer, db: str) -> None:
    with pg.connect(db) as conn:
        assert conn.execute("SELECT (SELECT v FROM t WHERE id = 2) AS v").fetchall() == [(20,)]
        assert conn.execute("SELECT (SELECT v FROM t WHERE id = 9) AS v").fetchall() == [(None,)]

"""pandas over a real server's PostgreSQL port: `to_sql` (create, append, replace),
`read_sql` of a query and `read_sql_table` through a SQLAlchemy engine, and `read_sql` over a
plain psycopg connection; the frames hold what `/exec` answers, with the dtypes pandas gives
the same table read from PostgreSQL 15 (timestamps tz-aware in UTC, floats, integers with
NULLs as float64 with NaN, text as pandas' str, booleans as bool). `replace` and
`read_sql_table` reflect the table with SQLAlchemy (its primary key, indexes and unique
constraints, see test_sqlalchemy)."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime

import pandas as pd
import psycopg

from tests.pgwire.clients.capture import normalised, record, relay
from tests.pgwire.clients.conftest import engine
from tests.pgwire.conftest import PgServer

FRAME = pd.DataFrame(
    {
        "id": [1, 2, 3],
        "price": [1.5, None, 3.25],
        "name": ["a", None, "c"],
        "at": pd.to_datetime(["2026-01-02T03:04:05Z", "2026-01-03T00:00:00Z", None], utc=True),
        "ok": [True, False, True],
    }
)


def test_to_sql_creates_appends_and_replaces(pg: PgServer, db: str) -> None:
    with relay(pg.host, pg.port) as captured:
        eng = engine(pg, db, captured.port)
        FRAME.to_sql("prices", eng, index=False)
        FRAME.to_sql("prices", eng, index=False, if_exists="append")
        assert pg.http.rows("SELECT count(*) FROM prices", db) == [[6]]
        columns = pg.http.rows("SHOW COLUMNS FROM prices", db)
        assert [(c[0], c[1]) for c in columns] == [
            ("id", "BIGINT"),
            ("price", "DOUBLE"),
            ("name", "STRING"),
            ("at", "TIMESTAMP"),
            ("ok", "BOOLEAN"),
        ]
        FRAME.head(1).to_sql("prices", eng, index=False, if_exists="replace")
        assert pg.http.rows("SELECT id, name FROM prices", db) == [[1, "a"]]
        record("pandas", normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}))


def test_read_sql_answers_what_exec_answers_with_pandas_types(pg: PgServer, db: str) -> None:
    pg.http.sql(
        "CREATE TABLE t (id INT PRIMARY KEY, n BIGINT, price DOUBLE, name STRING,"
        " at TIMESTAMP, ok BOOLEAN)",
        db,
    )
    pg.http.sql(
        "INSERT INTO t VALUES (1, 10, 1.5, 'a', '2026-01-02T03:04:05.250Z', true),"
        " (2, NULL, NULL, NULL, NULL, false), (3, 30, -2.0, 'c', '2026-05-06T00:00:00Z', NULL)",
        db,
    )
    query = "SELECT id, n, price, name, at, ok FROM t ORDER BY id"
    exec_rows = pg.http.rows(query, db)
    frame = pd.read_sql(query, engine(pg, db))
    assert list(frame.columns) == ["id", "n", "price", "name", "at", "ok"]
    assert frame["id"].tolist() == [row[0] for row in exec_rows]
    # An integer column with a NULL is float64 with NaN, as pandas reads PostgreSQL's.
    assert str(frame["n"].dtype) == "float64" and frame["n"].isna().tolist() == [False, True, False]
    assert frame["price"].tolist()[0] == 1.5 and pd.isna(frame["price"][1])
    assert frame["name"].isna().tolist() == [False, True, False] and frame["name"][2] == "c"
    assert str(frame["at"].dtype).startswith("datetime64") and str(frame["at"].dt.tz) == "UTC"
    assert frame["at"][0] == datetime(2026, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)
    assert pd.isna(frame["at"][1])
    with (
        psycopg.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, dbname=db
        ) as conn,
        warnings.catch_warnings(),
    ):
        # pandas warns that it tests only SQLAlchemy's connections; a DBAPI one works.
        warnings.simplefilter("ignore", UserWarning)
        plain = pd.read_sql(query, conn)
    pd.testing.assert_frame_equal(plain, frame)


def test_read_sql_table_answers_what_exec_answers_with_postgres_dtypes(
    pg: PgServer, db: str
) -> None:
    eng = engine(pg, db)
    FRAME.to_sql("prices", eng, index=False)
    pg.http.sql("ALTER TABLE prices ADD COLUMN n BIGINT", db)
    pg.http.sql("UPDATE prices SET n = id * 10 WHERE id <> 2", db)
    frame = pd.read_sql_table("prices", eng)
    exec_rows = pg.http.rows("SELECT * FROM prices", db)
    assert list(frame.columns) == ["id", "price", "name", "at", "ok", "n"]
    # The dtypes pandas gives this table read from PostgreSQL 15 (checked against one).
    assert {c: str(t) for c, t in frame.dtypes.items()} == {
        "id": "int64",
        "price": "float64",
        "name": str(pd.Series(["a"]).dtype),
        "at": "datetime64[us, UTC]",
        "ok": "bool",
        "n": "float64",
    }
    assert frame["id"].tolist() == [row[0] for row in exec_rows]
    assert frame["price"].isna().tolist() == [row[1] is None for row in exec_rows]
    assert frame["name"].isna().tolist() == [row[2] is None for row in exec_rows]
    assert [None if pd.isna(t) else t.isoformat() for t in frame["at"]] == [
        None if row[3] is None else datetime.fromisoformat(row[3]).isoformat() for row in exec_rows
    ]
    assert frame["ok"].tolist() == [row[4] for row in exec_rows]
    assert [None if pd.isna(n) else int(n) for n in frame["n"]] == [row[5] for row in exec_rows]

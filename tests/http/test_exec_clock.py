"""now() over `/exec` (spec/sql.md, "The transaction's time"): a text's BEGIN ... COMMIT block
reads one moment, its start, in every statement and row; outside a block each statement has
its own; and one request's time is never another's answer."""

from __future__ import annotations

from tests.http.conftest import Server


def test_a_block_of_one_request_writes_one_now(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP, at TIMESTAMP)", db)
    server.sql(
        "BEGIN; INSERT INTO t VALUES (1, now(), statement_timestamp()), (2, CURRENT_TIMESTAMP,"
        " statement_timestamp()); INSERT INTO t SELECT 3, transaction_timestamp(),"
        " statement_timestamp(); UPDATE t SET ts = LOCALTIMESTAMP WHERE id = 2;"
        " INSERT INTO t VALUES (4, now(), statement_timestamp()); COMMIT",
        db,
    )
    # In microseconds: an answer's JSON writes a TIMESTAMP to the millisecond.
    rows = server.rows("SELECT id, CAST(ts AS BIGINT), CAST(at AS BIGINT) FROM t ORDER BY id", db)
    assert len({ts for _, ts, _ in rows}) == 1, rows
    ats = [at for _, _, at in rows]
    assert ats[0] == ats[1] <= ats[2] <= ats[3], rows  # each statement its own start
    assert rows[0][1] <= ats[0]


def test_outside_a_block_each_statement_is_its_own_transaction(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP)", db)
    server.sql("INSERT INTO t VALUES (1, now()), (2, now())", db)
    server.sql("INSERT INTO t VALUES (3, now())", db)
    one, two, three = (
        ts for (ts,) in server.rows("SELECT CAST(ts AS BIGINT) FROM t ORDER BY id", db)
    )
    assert one == two < three
    first = server.rows("SELECT CAST(now() AS BIGINT) AS x, id FROM t WHERE id = 1", db)
    second = server.rows("SELECT CAST(now() AS BIGINT) AS x, id FROM t WHERE id = 1", db)
    assert first[0][0] < second[0][0]  # not a kept answer

"""LISTEN, NOTIFY, UNLISTEN and pg_notify() between real connections (psycopg, asyncpg),
and a table's committed changes on its channel `kdb_changes.<table>`."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import asyncpg
import psycopg
import pytest
from psycopg import errors as pgerrors

from tests.pgwire.conftest import PgServer


def received(conn: psycopg.Connection, count: int, timeout: float = 5.0) -> list[tuple]:
    """Up to `count` notifications as (channel, payload, pid), waiting at most `timeout`."""
    return [(n.channel, n.payload, n.pid) for n in conn.notifies(timeout=timeout, stop_after=count)]


def test_a_notification_reaches_every_listener_of_its_channel_and_no_other(pg, db):
    with pg.connect(db) as a, pg.connect(db) as b, pg.connect(db) as sender:
        a.execute("LISTEN news")
        b.execute('LISTEN "News"')  # quoted: another channel than news
        sender.execute("NOTIFY news, 'one'")
        sender.execute("NOTIFY News")  # unquoted names fold to lower case
        sender.execute("SELECT pg_notify(%s, %s)", ("News", "three"))
        pid = sender.info.backend_pid
        assert received(a, 2) == [("news", "one", pid), ("news", "", pid)]
        assert received(b, 1) == [("News", "three", pid)]
        assert received(a, 1, timeout=0.3) == []


def test_a_transaction_sends_its_notifications_at_its_commit_only(pg, db):
    with pg.connect(db) as listener, pg.connect(db) as sender:
        listener.execute("LISTEN c")
        sender.execute("BEGIN")
        sender.execute("NOTIFY c, 'committed'")
        sender.execute("NOTIFY c, 'committed'")  # the same one twice is sent once
        sender.execute("SELECT pg_notify('c', 'also')")
        assert received(listener, 1, timeout=0.3) == []  # not before the commit
        sender.execute("COMMIT")
        assert [p for _, p, _ in received(listener, 2)] == ["committed", "also"]
        sender.execute("BEGIN")
        sender.execute("NOTIFY c, 'rolled back'")
        sender.execute("ROLLBACK")
        sender.execute("BEGIN")
        sender.execute("NOTIFY c, 'failed'")
        with pytest.raises(pgerrors.UndefinedTable):
            sender.execute("SELECT * FROM nowhere")
        sender.execute("COMMIT")  # answers ROLLBACK
        sender.execute("NOTIFY c, 'last'")
        assert [p for _, p, _ in received(listener, 3, timeout=1)] == ["last"]


def test_a_listener_inside_a_transaction_gets_them_after_it(pg, db):
    with pg.connect(db) as listener, pg.connect(db) as sender:
        listener.execute("LISTEN c")
        listener.execute("BEGIN")
        sender.execute("NOTIFY c, 'x'")
        listener.execute("SELECT 1")
        assert received(listener, 1, timeout=0.3) == []
        listener.execute("COMMIT")
        assert [p for _, p, _ in received(listener, 1)] == ["x"]


def test_unlisten_and_other_databases(pg, db):
    other = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {other}")
    with pg.connect(db) as listener, pg.connect(db) as sender, pg.connect(other) as elsewhere:
        listener.execute("LISTEN a")
        listener.execute("LISTEN b")
        elsewhere.execute("NOTIFY a, 'another database'")
        listener.execute("UNLISTEN a")
        sender.execute("NOTIFY a, 'unlistened'")
        sender.execute("NOTIFY b, 'still'")
        assert [(c, p) for c, p, _ in received(listener, 2, timeout=1)] == [("b", "still")]
        listener.execute("UNLISTEN *")
        sender.execute("NOTIFY b, 'none'")
        assert received(listener, 1, timeout=0.3) == []


def test_bad_channels_and_payloads_are_refused_clearly(pg, db):
    with pg.connect(db) as conn:
        with pytest.raises(pgerrors.InvalidParameterValue, match="payload string too long"):
            conn.execute("SELECT pg_notify('c', %s)", ("x" * 8000,))
        with pytest.raises(pgerrors.InvalidParameterValue, match="1 to 63 bytes"):
            conn.execute(f"LISTEN {'c' * 64}")
        with pytest.raises(pgerrors.InvalidParameterValue, match="not NULL"):
            conn.execute("SELECT pg_notify(NULL, 'x')")
        conn.execute("NOTIFY c, %s" % ("'" + "x" * 7999 + "'"))  # the longest there is


def test_a_table_channel_sends_each_durable_change_as_its_change_record(pg, db):
    with pg.connect(db) as listener, pg.connect(db) as writer:
        writer.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, at TIMESTAMP)")
        writer.execute("INSERT INTO t VALUES (1, 'before', NULL)")  # before LISTEN: not sent
        listener.execute('LISTEN "kdb_changes.t"')
        writer.execute("INSERT INTO t VALUES (2, 'a', '2026-09-24T10:00:00Z'), (3, 'b', NULL)")
        writer.execute("BEGIN")
        writer.execute("DELETE FROM t WHERE id = 2")
        writer.execute("UPDATE t SET s = %s WHERE id = 3", ("z" * 9000,))
        writer.execute("COMMIT")
        notes = received(listener, 4)
        stream = pg.http.sql("SELECT lsn, seq, op, key FROM changes('t') ORDER BY lsn, seq", db)
    assert {c for c, _, _ in notes} == {"kdb_changes.t"} and {p for *_, p in notes} == {0}
    payloads = [json.loads(p) for _, p, _ in notes]
    assert [(p["lsn"], p["seq"], p["op"], p["key"]) for p in payloads] == [
        tuple(row) for row in stream["dataset"][-4:]
    ]
    assert payloads[0]["row"] == {"id": 2, "s": "a", "at": "2026-09-24T10:00:00.000Z"}
    assert payloads[1]["row"] == {"id": 3, "s": "b", "at": None}
    assert payloads[2]["row"] == {"id": None, "s": None, "at": None}  # a delete
    assert payloads[3]["truncated"] is True and "row" not in payloads[3]  # over 7999 bytes
    assert payloads[0]["committed_at"].endswith("Z")


def test_a_table_channel_needs_read_on_its_table_and_tells_nothing_of_others(pg, db):
    user = "lis_" + uuid.uuid4().hex[:8]
    pg.http.sql(f"CREATE USER {user}")
    pg.http.sql("CREATE TABLE open_t (id INT PRIMARY KEY)", db)
    pg.http.sql("CREATE TABLE closed_t (id INT PRIMARY KEY)", db)
    pg.http.sql(f"GRANT SELECT ON open_t TO {user}", db)
    token = pg.http.new_token(user)
    with pg.connect(db, user=user, password=token) as conn:
        conn.execute('LISTEN "kdb_changes.open_t"')
        answers = []
        for table in ("closed_t", "no_such_table"):
            with pytest.raises(pgerrors.InsufficientPrivilege) as caught:
                conn.execute(f'LISTEN "kdb_changes.{table}"')
            answers.append(str(caught.value).replace(table, "T"))
        assert answers[0] == answers[1]
        pg.http.sql("INSERT INTO open_t VALUES (5)", db)
        assert json.loads(received(conn, 1)[0][1])["row"] == {"id": 5}
        pg.http.sql(f"REVOKE SELECT ON open_t FROM {user}", db)
        pg.http.sql("INSERT INTO open_t VALUES (6)", db)
        ended = received(conn, 1)
    # Once the right is gone the channel ends with a last payload saying why.
    assert "error" in json.loads(ended[0][1])


def test_a_listener_that_reads_too_slowly_is_dropped_and_others_go_on(pg, db):
    with pg.connect(db) as slow, pg.connect(db) as quick, pg.connect(db) as sender:
        slow.execute("LISTEN c")
        quick.execute("LISTEN c")
        slow.execute("BEGIN")  # notifications wait for it while its transaction is open
        payload = "x" * 7000
        count = 200  # 1.4 MB: past the 1 MB a connection may leave unread
        started = time.monotonic()
        for _ in range(count):
            sender.execute("SELECT pg_notify('c', %s)", (payload,))
        assert time.monotonic() - started < 30  # the slow one stalls no sender
        assert len(received(quick, count, timeout=10)) == count
        with pytest.raises(psycopg.OperationalError, match="read its notifications too slowly"):
            slow.execute("COMMIT")


def test_asyncpg_add_listener(pg: PgServer, db: str) -> None:
    async def main() -> list[tuple[str, str]]:
        def connect() -> asyncpg.Connection:
            return asyncpg.connect(
                host=pg.host, port=pg.port, user="admin", password=pg.token, database=db
            )

        listener, sender = await connect(), await connect()
        got: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        try:
            await listener.add_listener(
                "jobs", lambda c, pid, ch, payload: got.put_nowait((ch, payload))
            )
            await sender.execute("NOTIFY jobs, 'first'")
            await sender.execute("SELECT pg_notify($1, $2)", "jobs", "second")
            return [await asyncio.wait_for(got.get(), 5) for _ in range(2)]
        finally:
            await listener.close()
            await sender.close()

    assert asyncio.run(main()) == [("jobs", "first"), ("jobs", "second")]

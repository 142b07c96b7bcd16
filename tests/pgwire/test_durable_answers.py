"""A commit's answer goes out once its flush ends, sent by the acknowledging thread: no
worker needs to be free for it (each may be blocked in a statement)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer
from tests.engine.features.held_disk import SOON, WHILE, HeldDisk

# The blocked INSERT's wait for the write lock: well past the time the answer takes once
# its flush ends, and it frees the one worker at its end.
LOCK_WAIT = 4.0


def _answered(conn: psycopg.Connection, within: float) -> bool:
    """Whether the query `conn` sent is answered within `within` seconds (its results then
    read, so that the connection takes the next)."""
    ends = time.monotonic() + within
    while time.monotonic() < ends:
        conn.pgconn.consume_input()
        if not conn.pgconn.is_busy():
            while conn.pgconn.get_result() is not None:
                pass
            return True
        time.sleep(0.005)
    return False


def test_a_durable_answer_goes_out_while_the_only_worker_is_blocked(tmp_path: Path) -> None:
    disk = HeldDisk()
    instance = Instance.open(tmp_path / "data", EngineOptions(statement_timeout=LOCK_WAIT), disk)
    server = None
    try:
        session = instance.session("demo", Principal("admin", is_admin=True))
        session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        database = instance.database("demo")
        server = PgServer(instance, PgOptions(port=0, threads=1, link=LinkOptions(dev=True)))
        server.start()
        conninfo = f"host=127.0.0.1 port={server.address[1]} user=admin dbname=demo"
        with (
            psycopg.connect(conninfo, autocommit=True) as writer,
            psycopg.connect(conninfo) as holder,
            psycopg.connect(conninfo, autocommit=True) as blocked,
        ):
            before = database.applied_lsn
            disk.hold()
            writer.pgconn.send_query(b"INSERT INTO t VALUES (1)")
            ends = time.monotonic() + SOON
            while database.applied_lsn == before:  # committed; its flush is held
                assert time.monotonic() < ends, "the commit never became visible"
                time.sleep(0.001)
            holder.execute("INSERT INTO t VALUES (2)")  # its transaction holds the write lock
            # Waits for that lock on the server's one worker thread.
            blocked.pgconn.send_query(b"INSERT INTO t VALUES (3)")
            time.sleep(WHILE)
            assert not _answered(writer, WHILE), "answered before its commit was durable"
            disk.release()
            assert _answered(writer, SOON / 2), "the durable answer waited for a worker"
            blocked.pgconn.consume_input()
            assert blocked.pgconn.is_busy()  # the worker was blocked all along
            assert _answered(blocked, LOCK_WAIT + SOON)  # its lock wait timed out
            holder.rollback()
        assert session.execute("SELECT id FROM t").rows == [(1,)]
    finally:
        disk.release()
        if server is not None:
            server.stop()
        instance.close()

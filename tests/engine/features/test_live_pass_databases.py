"""One pass of a user's woken live queries may hold subscriptions of several databases: the
failure of one database's log is the answer of that database's parts, not of the others'
(a database whose log is well answers its change)."""

from __future__ import annotations

import threading

from refimpl import Connection
from refimpl.engine.features.live_answers import Reply
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import WritesStopped
from tests.engine.features.candles import CANDLES, TRADES
from tests.engine.features.held_disk import HeldDisk, commit_held

ROW = "INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 1510)"


def _wait(conn: Connection, database: str) -> LiveWait:
    manager = conn.instance.subscriptions
    session = conn.instance.session(database, conn.session().principal)
    step = manager.follow(session, manager.ask_now(session, CANDLES, None))
    assert isinstance(step, LiveWait)
    step.watch(threading.Event())
    return step


def test_a_failed_log_is_the_answer_of_its_own_databases_parts_only(tmp_path):
    disk = HeldDisk()
    conn = Connection(Instance.open(tmp_path / "data", EngineOptions(), disk), "demo")
    try:
        conn.execute("CREATE DATABASE other")
        for name in ("demo", "other"):
            conn.instance.session(name, conn.session().principal).execute(TRADES)
            conn.instance.session(name, conn.session().principal).execute(ROW)
        failing, well = _wait(conn, "demo"), _wait(conn, "other")
        reads = PassReads()
        commit_held(conn, disk)  # demo's commit, made visible, its flush held
        assert isinstance(failing.attempt(True, None, reads), Reply)
        disk.release(fail=True)  # demo's flush fails: its log stops for good
        assert isinstance(reads.settle()[conn.instance.database("demo")], WritesStopped)
        disk.release()  # the disk is well again for the other database's log
        conn.instance.session("other", conn.session().principal).execute(
            "INSERT INTO trades VALUES ('2026-09-24T10:00:50Z', 'NABIL', 1540)"
        )
        # The other database's change, committed and durable, is its part's answer.
        reply = well.attempt(True, None, reads)
        assert isinstance(reply, Reply) and reply.rows[-1][-1] == 1540
    finally:
        disk.release()
        conn.close()

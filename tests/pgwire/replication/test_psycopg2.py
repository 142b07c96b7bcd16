"""psycopg2's LogicalReplicationConnection, unmodified: a slot made and streamed with
send_feedback, and a client killed mid-stream that resumes from what it confirmed: no
change lost, none it confirmed sent again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psycopg2
import psycopg2.errors
import psycopg2.extras

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import read_messages, replication_cursor

# A client in a process of its own: it prints each message (position and text) as JSON,
# confirms the one numbered CONFIRM (and every one before it) with send_feedback, says so,
# and waits to be killed.
_CLIENT = textwrap.dedent(
    """
    import json, sys, time
    import psycopg2, psycopg2.extras
    host, port, token, db, slot, confirm = sys.argv[1:7]
    factory = psycopg2.extras.LogicalReplicationConnection
    conn = psycopg2.connect(host=host, port=int(port), user="admin", password=token,
                            dbname=db, connection_factory=factory)
    cur = conn.cursor()
    cur.start_replication(slot_name=slot, decode=True, options={"include-xids": "0"})
    seen = 0
    while True:
        msg = cur.read_message()
        if msg is None:
            time.sleep(0.01)
            continue
        seen += 1
        print(json.dumps([msg.data_start, msg.payload]), flush=True)
        if seen == int(confirm):
            cur.send_feedback(flush_lsn=msg.data_start, force=True)
            time.sleep(0.5)
            print("confirmed", flush=True)
    """
)


def _start_when_let_go(cursor: psycopg2.extras.ReplicationCursor, slot: str) -> None:
    """START_REPLICATION once the server has noticed that the slot's last client went:
    until then the slot is active for that client's connection (55006), as in PostgreSQL."""
    deadline = time.monotonic() + 10
    while True:
        try:
            cursor.start_replication(slot_name=slot, decode=True, options={"include-xids": "0"})
            return
        except psycopg2.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_send_feedback_and_a_resume_after_a_kill(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db=db)
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_kill", output_plugin="test_decoding")
    connection.close()
    pg.http.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", db=db)
    pg.http.sql("INSERT INTO t VALUES (4, 'd')", db=db)
    # Messages: BEGIN, 1, 2, 3, COMMIT, BEGIN, 4, COMMIT; the client confirms the 3rd (row 2).
    child = subprocess.Popen(
        [sys.executable, "-c", _CLIENT, pg.host, str(pg.port), pg.token, db, "s_kill", "3"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    lines = []
    for line in child.stdout:
        if line.strip() == "confirmed":
            break
        lines.append(json.loads(line))
    os.kill(child.pid, signal.SIGKILL)
    child.wait(10)
    assert [text for _, text in lines[:3]] == [
        "BEGIN",
        "table public.t: INSERT: id[integer]:1 v[text]:'a'",
        "table public.t: INSERT: id[integer]:2 v[text]:'b'",
    ]
    confirmed = lines[2][0]
    # Positions are ordered and the confirmed one is the 2nd change of its transaction.
    positions = [at for at, _ in lines]
    assert positions == sorted(positions)
    assert confirmed % 4096 == 2

    connection, cursor = replication_cursor(pg, db)
    _start_when_let_go(cursor, "s_kill")
    resumed = read_messages(cursor, 6)
    assert [text for _, text in resumed] == [
        "BEGIN",
        "table public.t: INSERT: id[integer]:3 v[text]:'c'",
        "COMMIT",
        "BEGIN",
        "table public.t: INSERT: id[integer]:4 v[text]:'d'",
        "COMMIT",
    ]
    assert all(at > confirmed for at, _ in resumed[1:])
    # Confirm everything: a new stream gets only what commits after it.
    cursor.send_feedback(flush_lsn=resumed[-1][0], force=True)
    time.sleep(0.3)
    connection.close()
    pg.http.sql("INSERT INTO t VALUES (5, 'e')", db=db)
    connection, cursor = replication_cursor(pg, db)
    _start_when_let_go(cursor, "s_kill")
    assert [text for _, text in read_messages(cursor, 3)] == [
        "BEGIN",
        "table public.t: INSERT: id[integer]:5 v[text]:'e'",
        "COMMIT",
    ]
    connection.close()


def test_replication_commands_answer_as_postgresql(pg: PgServer, db: str) -> None:
    connection, cursor = replication_cursor(pg, db)
    cursor.execute("IDENTIFY_SYSTEM")
    row = cursor.fetchone()
    assert row is not None
    systemid, timeline, position, dbname = row
    assert (timeline, dbname) == (1, db) and systemid.isdigit()
    assert position == pg.http.rows("SELECT pg_current_wal_lsn()", db=db)[0][0]
    cursor.execute(
        "CREATE_REPLICATION_SLOT s_tmp TEMPORARY LOGICAL test_decoding (SNAPSHOT 'nothing')"
    )
    assert cursor.fetchone() == ("s_tmp", position, None, "test_decoding")
    cursor.execute("READ_REPLICATION_SLOT nosuch")
    assert cursor.fetchone() == (None, None, None)
    for command, state in [
        ("READ_REPLICATION_SLOT s_tmp", "0A000"),
        ("START_REPLICATION 0/0", "0A000"),
        ("BASE_BACKUP", "0A000"),
        ("DROP_REPLICATION_SLOT nosuch", "42704"),
        ("START_REPLICATION SLOT s_tmp LOGICAL 1/zz", "42601"),
    ]:
        try:
            cursor.execute(command)
        except psycopg2.Error as error:
            assert error.pgcode == state, (command, error.pgerror)
        else:
            raise AssertionError(f"{command} was not refused")
    # Plain SQL on the same connection.
    cursor.execute("SELECT 1 + 1")
    assert cursor.fetchone() == (2,)
    connection.close()
    # The temporary slot goes with its connection (once the server has seen it close).
    connection, cursor = replication_cursor(pg, db)
    deadline = time.monotonic() + 5
    while True:
        try:
            cursor.execute("READ_REPLICATION_SLOT s_tmp")
            assert cursor.fetchone() == (None, None, None)
            break
        except psycopg2.errors.FeatureNotSupported:
            assert time.monotonic() < deadline, "the temporary slot outlived its connection"
            time.sleep(0.05)
    connection.close()


def test_physical_replication_is_refused(pg: PgServer, db: str) -> None:
    try:
        psycopg2.connect(
            host=pg.host,
            port=pg.port,
            user="admin",
            password=pg.token,
            dbname=db,
            connection_factory=psycopg2.extras.PhysicalReplicationConnection,
        )
    except psycopg2.OperationalError as error:
        assert "physical replication is not supported" in str(error)
    else:
        raise AssertionError("a physical replication connection was accepted")


def test_an_active_slot_is_held_by_its_connection(pg: PgServer, db: str) -> None:
    streaming, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_held", output_plugin="test_decoding")
    cursor.start_replication(slot_name="s_held", decode=True)
    other, other_cursor = replication_cursor(pg, db)
    try:
        other_cursor.execute("DROP_REPLICATION_SLOT s_held")
    except psycopg2.Error as error:
        assert error.pgcode == "55006"
        assert 'replication slot "s_held" is active for PID' in str(error)
    else:
        raise AssertionError("an active slot was dropped")
    try:
        other_cursor.start_replication(slot_name="s_held", decode=True)
    except psycopg2.Error as error:
        assert error.pgcode == "55006"
    else:
        raise AssertionError("a second connection streamed from an active slot")
    other.close()
    # DROP ... WAIT waits for the streaming connection to let the slot go.
    dropper, dropper_cursor = replication_cursor(pg, db)
    done = threading.Event()

    def drop() -> None:
        dropper_cursor.execute("DROP_REPLICATION_SLOT s_held WAIT")
        done.set()

    thread = threading.Thread(target=drop, daemon=True)
    thread.start()
    assert not done.wait(0.5), "DROP ... WAIT did not wait for the active slot"
    streaming.close()
    assert done.wait(10), "DROP ... WAIT did not end once the slot was let go"
    thread.join(5)
    dropper.close()
    # A slot streams only in the database it was made in.
    first, first_cursor = replication_cursor(pg, db)
    first_cursor.create_replication_slot("s_elsewhere", output_plugin="test_decoding")
    first.close()
    demo, demo_cursor = replication_cursor(pg, "demo")
    try:
        demo_cursor.start_replication(slot_name="s_elsewhere", decode=True)
    except psycopg2.Error as error:
        assert error.pgcode == "55000"
        assert "was not created in this database" in str(error)
    else:
        raise AssertionError("a slot streamed in another database")
    demo.close()

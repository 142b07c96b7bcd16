"""A slot keeps no log for itself: once WAL_ARCHIVE has removed what follows its position it
is lost (wal_status 'lost') and its client gets PostgreSQL's error, never a gap."""

from __future__ import annotations

import time

import psycopg2
import psycopg2.extras
import pytest

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import read_payloads, replication_cursor

PAD = "x" * 1500


def _wal_status(pg: PgServer, db: str, slot: str) -> str:
    rows = pg.http.rows(
        f"SELECT wal_status FROM pg_replication_slots WHERE slot_name = '{slot}'", db=db
    )
    return str(rows[0][0])


def test_a_slot_past_the_kept_log_is_lost(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db=db)
    pg.http.sql(f"ALTER DATABASE {db} SET WAL_ARCHIVE = '64KB'", db=db)
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_old", output_plugin="test_decoding")
    connection.close()
    assert _wal_status(pg, db, "s_old") == "reserved"
    for n in range(200):  # about 300 KB of log: the archive keeps 64 KB of it
        pg.http.sql(f"INSERT INTO t VALUES ({n}, '{PAD}')", db=db)
    deadline = time.monotonic() + 20
    while _wal_status(pg, db, "s_old") != "lost" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _wal_status(pg, db, "s_old") == "lost"

    connection, cursor = replication_cursor(pg, db)
    with pytest.raises(psycopg2.Error) as lost:
        cursor.start_replication(slot_name="s_old", decode=True)
    assert lost.value.pgcode == "55000"
    assert 'can no longer get changes from replication slot "s_old"' in str(lost.value)
    connection.close()

    # A slot made now streams what follows, from the log that is kept.
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_new", output_plugin="test_decoding")
    pg.http.sql("INSERT INTO t VALUES (1000, 'new')", db=db)
    cursor.start_replication(slot_name="s_new", decode=True, options={"include-xids": "0"})
    got = read_payloads(cursor, 3)
    assert got[1] == "table public.t: INSERT: id[integer]:1000 v[text]:'new'"
    connection.close()

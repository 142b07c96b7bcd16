"""The protocol's places: one worker answers cheap requests, costly ones move beside it.

A costly statement (here a text past `admission.LARGE_TEXT`) runs on the long place, and a
second one waits for that place with its ordinary place handed on: a cheap query on another
connection is answered meanwhile, at once, not after either costly one
(`refimpl.pgwire.serving`'s PLACES and LONG_PLACES, `refimpl.netpool.places`' `apart`).
"""

from __future__ import annotations

import time
from pathlib import Path

import psycopg
import pytest

from refimpl.engine import admission
from refimpl.engine.admission import LARGE_TEXT
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.pgwire.link import LinkOptions
from refimpl.pgwire.serving import PgOptions, PgServer

# Over a second of scanning each (three million rows), costly by its text's length alone.
COSTLY = (
    "SELECT count(*) FROM generate_series(1, 3000000) g"
    f" WHERE g % 7 = 3 AND '{'x' * (LARGE_TEXT + 1)}' <> ''"
)
CHEAP_SECONDS = 2.0  # a cheap query's answer while the costly ones run: well within this


def test_cheap_queries_are_answered_while_costly_ones_hold_and_wait_for_the_long_place(pg):
    costly = [pg.connect() for _ in range(2)]
    try:
        for conn in costly:
            conn.pgconn.send_query(COSTLY.encode())
        time.sleep(0.3)  # one runs on the long place, the other waits for it
        with pg.connect() as cheap:
            for n in range(5):
                began = time.monotonic()
                assert cheap.execute("SELECT %s::int", (n,)).fetchone() == (n,)
                assert time.monotonic() - began < CHEAP_SECONDS
        for conn in costly:
            conn.pgconn.consume_input()
        # Both still at work: the cheap answers did not wait for either to end.
        assert all(conn.pgconn.is_busy() for conn in costly)
        for conn in costly:
            conn.pgconn.nonblocking = 0
            result = conn.pgconn.get_result()
            assert result is not None and result.get_value(0, 0) == b"428572"
    finally:
        for conn in costly:
            conn.pgconn.finish()


SCAN = "SELECT count(*) FROM t WHERE v % 3 = 1"  # past a slice of rows: looks at its time


def test_a_request_is_long_from_its_own_start_not_from_when_its_worker_took_the_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Far above what the scan takes, however loaded the machine, and below the worker's
    # idle polling before it: the scan is long only if counted from the worker's place.
    monkeypatch.setattr(admission, "LONG_SECONDS", 0.5)
    instance = Instance.open(tmp_path)
    server = None
    try:
        session = instance.session("demo", Principal("admin", is_admin=True))
        session.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        session.execute("INSERT INTO t SELECT g, g FROM generate_series(1, 6000) g")
        server = PgServer(instance, PgOptions(port=0, threads=4, link=LinkOptions(dev=True)))
        server.start()
        conninfo = f"host=127.0.0.1 port={server.address[1]} user=admin dbname=demo"
        with psycopg.connect(conninfo, autocommit=True) as conn:
            time.sleep(1.0)  # the worker holds its place, polling, all this while
            assert conn.execute(SCAN).fetchone() == (2000,)
            costly = psycopg.connect(conninfo, autocommit=True)
            try:
                costly.pgconn.send_query(COSTLY.encode())  # holds the long place meanwhile
                time.sleep(0.3)
                began = time.monotonic()
                # Not remembered as costly: it does not wait for the long place.
                assert conn.execute(SCAN).fetchone() == (2000,)
                assert time.monotonic() - began < CHEAP_SECONDS
                costly.pgconn.consume_input()
                assert costly.pgconn.is_busy()
            finally:
                costly.pgconn.finish()
    finally:
        if server is not None:
            server.stop()
        instance.close()

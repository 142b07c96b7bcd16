"""COPY FROM STDIN counts its data against memory_mb as it arrives: a COPY larger than the
limit is refused (53200) once it passes it, nothing copied, its held rows let go."""

from __future__ import annotations

import threading

import psycopg
import pytest

from tests.pgwire.attack import assert_alive, pg_server

LINE = b"1\t" + b"y" * 198 + b"\n"  # 200 bytes a row
SENT = 200 * 1024 * 1024  # the COPY's data in all: far past the limit below


def test_a_copy_past_the_memory_limit_is_refused_as_it_arrives(tmp_path):
    with pg_server(tmp_path, memory_mb=32) as pg:
        pg.http.sql("CREATE TABLE t (id INT, v STRING)")
        pg.http.sql("INSERT INTO t VALUES (7, 'kept')")
        victim = pg.connect()
        before = pg.http.memory_kb()
        peak = [0]
        copying = threading.Event()

        def watch() -> None:  # the server's memory while the COPY is sent
            while not copying.wait(0.2):
                peak[0] = max(peak[0], pg.http.memory_kb() - before)

        watcher = threading.Thread(target=watch)
        watcher.start()
        block = LINE * 5000
        try:
            with pg.connect() as conn, pytest.raises(psycopg.errors.OutOfMemory) as caught:
                with conn.cursor() as cur, cur.copy("COPY t (id, v) FROM STDIN") as copy:
                    for _ in range(SENT // len(block)):
                        copy.write(block)
        finally:
            copying.set()
            watcher.join()
        assert peak[0] < 150 * 1024, f"the server grew {peak[0]} kB for a refused COPY"
        assert "memory_mb" in str(caught.value) and "nothing was copied" in str(caught.value)
        assert_alive(pg, victim)
        assert pg.http.rows("SELECT id, v FROM t") == [[7, "kept"]]
        with pg.connect() as conn:  # a COPY within the limit still works
            with conn.cursor() as cur, cur.copy("COPY t (id, v) FROM STDIN") as copy:
                copy.write(LINE * 100)
        assert pg.http.rows("SELECT count(*) FROM t") == [[101]]
        victim.close()

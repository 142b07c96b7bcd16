"""A client that pipelines queries and reads no answer holds one answer's worth of memory:
the server stops reading its messages while its unsent answers are past a bound."""

from __future__ import annotations

import time

from tests.pgwire.attack import (
    MessageReader,
    assert_alive,
    logged_in,
    pg_server,
    query_message,
)

WIDE = "x" * 14_000
# 300 of them are 14 KB of SQL, read at once; each is answered 0.7 MB (the 50 rows of
# `wide`): a server that answered all it read would hold 210 MB.
QUERY = query_message("SELECT v FROM wide --" + "-" * 20)


def test_pipelined_queries_read_no_further_than_their_unsent_answers(tmp_path):
    with pg_server(tmp_path) as pg:
        pg.http.sql("CREATE USER reader")
        pg.http.sql("GRANT READ ON DATABASE demo TO reader")
        pg.http.sql("CREATE TABLE kept (id INT)")
        pg.http.sql("INSERT INTO kept VALUES (1)")
        pg.http.sql("CREATE TABLE wide (v STRING)")
        pg.http.sql(f"INSERT INTO wide SELECT '{WIDE}' FROM generate_series(1, 50)")
        token = pg.http.new_token("reader")
        victim = pg.connect()
        before = pg.http.memory_kb()
        flood = logged_in(pg, "reader", token)
        flood.sendall(QUERY * 300)
        peak = 0
        for _ in range(6):  # a few seconds in which a server that reads on would grow
            time.sleep(0.5)
            peak = max(peak, pg.http.memory_kb() - before)
            assert_alive(pg, victim)
        assert peak < 60 * 1024, f"the server grew {peak} kB for 300 pipelined queries"
        flood.close()
        assert_alive(pg, victim)
        assert pg.http.rows("SELECT id FROM kept") == [[1]]
        victim.close()


def test_pipelined_answers_all_come_in_order_to_a_client_that_reads_late(pg):
    token = pg.token
    sock = logged_in(pg, "admin", token)
    sock.sendall(
        b"".join(
            query_message(f"SELECT {n}, '{WIDE}' FROM generate_series(1, 50)") for n in range(40)
        )
    )
    time.sleep(1.0)  # the answers wait, past the bound
    reader = MessageReader(sock)
    firsts: list[bytes] = []
    for _ in range(40):
        kind, body = reader.next()
        while kind != b"D":
            kind, body = reader.next()
        firsts.append(body)
        assert reader.until(b"C", 1) == [b"SELECT 50\0"]
    assert [int(body[6 : 6 + int.from_bytes(body[2:6], "big")]) for body in firsts] == list(
        range(40)
    )
    sock.close()

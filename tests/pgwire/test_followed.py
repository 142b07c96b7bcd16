"""A connection waiting for its next messages stays registered edge-triggered, and a worker
done with it frees it without re-arming it (`serving.PgServer._rearm`): what arrives
after that, what arrived while a worker still had it, and what one read left in the
socket are all answered, in order."""

from __future__ import annotations

import random
import socket
import time

from tests.pgwire.attack import MessageReader, logged_in, query_message, read_until_closed

# Larger than a worker's read (sockets.READ_BYTES, 64 KB) in one send: the bytes past the
# first read raise no event of their own.
PADDED = 400


def _numbers(reader: MessageReader, count: int) -> list[int]:
    """The one value of each of `count` one-row answers, in order."""
    values = []
    for _ in range(count):
        (row,) = reader.until(b"D", 1)
        values.append(int(row[6 : 6 + int.from_bytes(row[2:6], "big")]))
        reader.until(b"Z", 1)
    return values


def test_bytes_past_one_read_are_answered(pg):
    sock = logged_in(pg, "admin", pg.token)
    pad = "-" * 1000
    sock.sendall(b"".join(query_message(f"SELECT {n} --{pad}") for n in range(PADDED)))
    assert _numbers(MessageReader(sock), PADDED) == list(range(PADDED))
    sock.close()


def test_messages_that_come_while_a_worker_has_the_connection_are_answered(pg, db):
    """A query sent while the one before it runs, or waits for its commit's flush, comes
    while the worker (or the acknowledgement) still has the connection: its event is kept
    for it. The pauses vary so that it comes at every stage of the one before."""
    pg.http.sql("CREATE TABLE seen (id INT PRIMARY KEY)", db)
    sock = logged_in(pg, "admin", pg.token, db)
    reader = MessageReader(sock)
    rng = random.Random(7)
    for n in range(60):
        first = (
            f"INSERT INTO seen VALUES ({n}) RETURNING id"
            if n % 2
            else f"SELECT count(*) + {n} - count(*) FROM generate_series(1, 20000)"
        )
        sock.sendall(query_message(first))
        time.sleep(rng.choice([0, 0.0005, 0.002, 0.01]))
        sock.sendall(query_message(f"SELECT {1000 + n}"))
        assert _numbers(reader, 2) == [n, 1000 + n]
    # And one at a time: each freed without a re-arm, the next arriving after that.
    for n in range(200):
        sock.sendall(query_message(f"SELECT {n}"))
        assert _numbers(reader, 1) == [n]
    sock.close()
    assert pg.http.rows("SELECT count(*) FROM seen", db) == [[30]]


def test_a_client_that_ends_its_stream_with_its_last_bytes_is_closed(pg):
    """The client's end of the stream (its FIN) may come with its last bytes, in one event:
    the read that takes those bytes is short, yet the end is still to be read, and no
    other event comes for it. The server must see it and close the connection (it must
    not wait for ever for the rest of a message that never comes)."""
    for _ in range(10):
        sock = logged_in(pg, "admin", pg.token)
        sock.sendall(b"Q" + (1000).to_bytes(4, "big") + b"SELECT")  # a message cut short
        sock.shutdown(socket.SHUT_WR)
        sock.settimeout(30)
        while sock.recv(65536):  # until the server closes (a TimeoutError: it never does)
            pass
        sock.close()


def test_a_client_that_ends_its_stream_after_a_whole_query_is_answered_then_closed(pg, db):
    """A query, then the client's end of the stream: at once (corked, one segment: one
    event for both, the short read takes the bytes and leaves the end), while the query
    runs, or while its commit waits for the flush (the end's event then comes while a
    worker, or the acknowledgement, has the connection). Each is answered, then the
    connection is closed (never held open waiting for more)."""
    pg.http.sql("CREATE TABLE ended (id INT PRIMARY KEY)", db)
    rng = random.Random(11)
    for n in range(24):
        sql = (
            f"INSERT INTO ended VALUES ({n}) RETURNING id",
            f"SELECT count(*) + {n} - count(*) FROM generate_series(1, 20000)",
            f"SELECT {n}",
        )[n % 3]
        sock = logged_in(pg, "admin", pg.token, db)
        pause = rng.choice([None, 0.0005, 0.002, 0.01]) if n >= 6 else None
        if pause is None:  # corked: the query and the end go out in one segment
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        sock.sendall(query_message(sql))
        time.sleep(pause or 0)
        sock.shutdown(socket.SHUT_WR)
        answer = read_until_closed(sock, 30)  # a TimeoutError: the server kept it open
        assert f"{n}".encode() in answer and answer.endswith(b"Z\x00\x00\x00\x05I")
        sock.close()
    assert pg.http.rows("SELECT count(*) FROM ended", db) == [[8]]

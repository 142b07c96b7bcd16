"""The protocol's places: one worker answers cheap requests, costly ones move beside it.

A costly statement (here a text past `admission.LARGE_TEXT`) runs on the long place, and a
second one waits for that place with its ordinary place handed on: a cheap query on another
connection is answered meanwhile, at once, not after either costly one
(`refimpl.pgwire.serving`'s PLACES and LONG_PLACES, `refimpl.netpool.places`' `apart`).
"""

from __future__ import annotations

import time

from refimpl.engine.admission import LARGE_TEXT

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

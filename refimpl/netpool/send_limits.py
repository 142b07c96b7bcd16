"""How long a client may take to receive an answer, whatever protocol it speaks.

An answer the socket did not take at once waits with its connection, in the server's memory,
until the client takes it. A client that takes a little now and then would keep it (and its
connection) for ever, however short each of its pauses: so the whole answer has a deadline,
counted from when its first byte was sent. It is `SEND_GRACE_SECONDS`, plus one second for
each `SEND_MIN_BYTES_PER_SECOND` of the answer: a client that takes its answer at least that
fast on average, after a start as slow as it likes, is never cut off, and a large answer
gets the time it needs; one slower is closed at the deadline.

An answer sent in parts as the server makes them (a streamed body, a COPY TO's rows) has the
same allowance as a budget of waiting: only the time the server waits for the client to take
what it sent counts against it, never the time the server takes to make the next part, so
that an answer made slower than `SEND_MIN_BYTES_PER_SECOND` (a slow query's rows) reaches a
client that reads at once.
"""

from __future__ import annotations

SEND_GRACE_SECONDS = 60.0
SEND_MIN_BYTES_PER_SECOND = 64 * 1024  # 512 kbit/s


def send_deadline(started: float, size: int) -> float:
    """The time (of `time.monotonic()`) by which an answer of `size` bytes whose first byte
    went at `started` must have been taken whole."""
    return started + SEND_GRACE_SECONDS + size / SEND_MIN_BYTES_PER_SECOND


def send_allowance(size: int) -> float:
    """The seconds `size` more bytes of an answer add to its deadline (a streamed answer's
    budget of waiting grows with each part)."""
    return size / SEND_MIN_BYTES_PER_SECOND

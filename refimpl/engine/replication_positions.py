"""One position for every outlet of the change stream, in PostgreSQL's 64-bit LSN form.

A change is at (LSN, place): the LSN of the transaction that committed it and its place in
that transaction as the outlet shows it, from 1 (the event stream's `<lsn>.<n>`; `seq + 1`
of a `changes()` row). PostgreSQL's LSN of it is `LSN * 4096 + place`, written `X/Y` (the
high and low 32 bits in hexadecimal). Place 0 stands before the transaction's first change
(its Begin), place 4095 after its last (its end, what a Commit carries and what a plain LSN
means). The 4094th and every later change of one transaction share place 4094: a resume
from it replays that transaction from its 4095th change, so nothing is ever skipped.

The map is ordered (a later change has a larger position) and one-to-one for the first 4093
changes of every transaction; it holds for LSNs below 2**52, which a restore's timeline base
(microseconds since 1970) stays under until the year 2112.
"""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.errors import BadRequest

PLACE_BITS = 12
SPAN = 1 << PLACE_BITS  # positions a transaction owns
END = SPAN - 1  # the place after a transaction's last change
LAST_PLACE = SPAN - 2  # the place the 4094th and later changes share
MAX_LSN = (1 << (64 - PLACE_BITS)) - 1


@dataclass(frozen=True, slots=True)
class Resume:
    """What a position stands for: every transaction up to `done_lsn`, and the first
    `skip` changes of transaction `done_lsn + 1` (0: none of it)."""

    done_lsn: int
    skip: int


def position(lsn: int, place: int) -> int:
    """The 64-bit position of the change at `place` (from 1; 0 before the first change,
    END after the last) of transaction `lsn`."""
    if not 0 <= lsn <= MAX_LSN:
        raise BadRequest(f"LSN {lsn} is beyond what a 64-bit replication position holds")
    return lsn * SPAN + (place if place == END else min(place, LAST_PLACE))


def end_of(lsn: int) -> int:
    """The position after every change of transaction `lsn` (`lsn` 0: before the first)."""
    return position(lsn, END)


def resume(pos: int) -> Resume:
    """What a client that holds `pos` has received (the inverse of `position`)."""
    lsn, place = divmod(pos, SPAN)
    if place == END:
        return Resume(lsn, 0)
    if lsn == 0:
        return Resume(0, 0)
    return Resume(lsn - 1, place)


def text(pos: int) -> str:
    """PostgreSQL's `X/Y` text of a position."""
    return f"{pos >> 32:X}/{pos & 0xFFFFFFFF:X}"


def parse(written: str) -> int:
    """A position from its `X/Y` text; BadRequest says what is wrong with any other text."""
    high, slash, low = written.strip().partition("/")
    try:
        if not slash or not high or not low or len(high) > 8 or len(low) > 8:
            raise ValueError(written)
        pos = (int(high, 16) << 32) | int(low, 16)
    except ValueError:
        raise BadRequest(
            f'invalid input syntax for type pg_lsn: "{written}"; write a position as X/Y,'
            " two hexadecimal numbers of up to 8 digits (0/0 is the start)"
        ) from None
    return pos


def of_event_id(event_id: str) -> int:
    """The position of an event stream id: `<lsn>.<n>` or a plain `<lsn>`."""
    lsn, dot, n = event_id.partition(".")
    return position(int(lsn), int(n)) if dot else end_of(int(lsn))


def of_change_row(lsn: int, seq: int) -> int:
    """The position of a `changes()` row (`seq` from 0)."""
    return position(lsn, seq + 1)

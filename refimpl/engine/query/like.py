"""LIKE patterns matched without backtracking.

A pattern (`%` any run of characters, the empty one included; `_` exactly one character;
every other character itself, case-sensitive; no escape character) is cut at its `%`s into
pieces of fixed length. The text must start with the first piece and end with the last; the
pieces between are found left to right, each at its leftmost place after the one before.
Taking the leftmost place is never wrong: a piece found further left leaves more text for
the pieces after it. A pattern such as `%a%a%a%b` costs no more than its length (a regex of
it backtracks exponentially, in one C call that holds the interpreter lock).

A piece is found from its literal runs (its stretches without `_`), each different run at
its first offset in the piece, by `str.find` (C) alone: the piece's place is moved on to
where the next run occurs, the runs taken in turn, until every run is in its place at one
position; only there is the whole piece checked, and the search goes on one place further
if it fails. A run that does not occur after the place reached ends the search: the piece
is not there, whatever the rest of it, so `%a_a_..._b%` over a text without `b` costs one
scan in C and no loop in Python. A piece of few runs is checked with `startswith` at each
run's offset, one of more in one C call (a compiled regular expression of fixed length,
`.` for `_`, which cannot backtrack).

What is left costs O(len(text) * len(pattern)) at worst: a text in which the piece's runs
stand in their places at many positions while the whole piece fails late (`%a_a_..._a%`
over runs of `a` a little shorter than the piece). Its sizes are the client's, so the
search looks at the statement's deadline every CHECK_EVERY searches
(`refimpl.engine.query.deadlines`): such a LIKE stops with the statement timeout.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from refimpl.engine.query import deadlines

Matcher = Callable[[str], bool]
CHECK_EVERY = 256  # searches of a piece's runs between two looks at the deadline
_FEW_RUNS = 3  # runs checked in place by startswith; more: one compiled expression


class _Piece:
    """A run of the pattern between two `%`: literal characters and `_` (any one)."""

    __slots__ = ("text", "size", "runs", "distinct", "compiled")

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)
        self.runs = _literal_runs(text)
        # Each different run once, at its first offset in the piece: the runs `find` looks
        # for in the text.
        first_offsets: dict[str, int] = {}
        for start, run in self.runs:
            first_offsets.setdefault(run, start)
        self.distinct = [(start, run) for run, start in first_offsets.items()]
        self.compiled: re.Pattern[str] | None = None
        if len(self.runs) > _FEW_RUNS:
            body = ".".join(re.escape(part) for part in text.split("_"))
            self.compiled = re.compile(body, re.DOTALL)

    def matches_at(self, value: str, position: int) -> bool:
        """The piece matches `value` at `position` (the caller knows it fits)."""
        if self.compiled is not None:
            return self.compiled.match(value, position) is not None
        return all(value.startswith(run, position + start) for start, run in self.runs)

    def find(self, value: str, start: int, end: int) -> int:
        """The leftmost position >= start where the piece matches within value[:end], or -1."""
        last = end - self.size  # the last position where the piece still fits
        if last < start:
            return -1
        if not self.runs:  # only `_`: any place with room for it
            return start
        position = start
        agreeing = 0  # runs in a row found in place at `position`
        finds = 0
        while True:
            for at, run in self.distinct:
                found = value.find(run, position + at, last + at + len(run))
                if found < 0:  # this run is nowhere the piece could still be: neither is it
                    return -1
                finds += 1
                if finds % CHECK_EVERY == 0:
                    deadlines.check()
                if found - at > position:  # no place before this run's one can hold the piece
                    position, agreeing = found - at, 1
                else:
                    agreeing += 1
                if agreeing < len(self.distinct):
                    continue
                if self.matches_at(value, position):
                    return position
                position, agreeing = position + 1, 0


def _literal_runs(piece: str) -> list[tuple[int, str]]:
    """(offset, text) of each run of the piece without `_`."""
    runs = []
    start = 0
    for part in piece.split("_"):
        if part:
            runs.append((start, part))
        start += len(part) + 1
    return runs


def like_matcher(pattern: str) -> Matcher:
    """A function telling whether a whole text matches the LIKE pattern."""
    pieces = [_Piece(text) for text in pattern.split("%")]
    if len(pieces) == 1:
        only = pieces[0]
        if "_" not in only.text:
            return only.text.__eq__
        return lambda value: len(value) == only.size and only.matches_at(value, 0)
    first, middle, last = pieces[0], pieces[1:-1], pieces[-1]
    least = sum(piece.size for piece in pieces)

    def matches(value: str) -> bool:
        end = len(value)
        if end < least or not first.matches_at(value, 0):
            return False
        tail = end - last.size
        if not last.matches_at(value, tail):
            return False
        position = first.size
        for index, piece in enumerate(middle, 1):
            found = piece.find(value, position, tail)
            if found < 0:
                return False
            position = found + piece.size
            if index % CHECK_EVERY == 0:  # each piece's find is a scan of the text
                deadlines.check()
        return True

    return matches

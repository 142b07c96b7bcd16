"""LIKE patterns matched without backtracking.

A pattern (`%` any run of characters, the empty one included; `_` exactly one character;
every other character itself, case-sensitive; no escape character) is cut at its `%`s into
pieces of fixed length. The text must start with the first piece and end with the last; the
pieces between are found left to right, each at its leftmost place after the one before.
Taking the leftmost place is never wrong: a piece found further left leaves more text for
the pieces after it. Each piece is found by `str.find` of its longest run without `_`, so
matching costs O(len(text) * len(pattern)) at worst and usually one `find` a piece: a
pattern such as `%a%a%a%b` costs no more than its length (a regex of it backtracks
exponentially, in one C call that holds the interpreter lock).

The worst case (`%a_a_..._b%` over a long run of `a`s: every place is a candidate, each
checked over the whole piece) is what a client chooses the sizes of, so a piece checks a
candidate in one C call (a compiled regular expression of fixed length, `.` for `_`, which
cannot backtrack) and the statement's deadline every CHECK_EVERY candidates
(`refimpl.engine.query.deadlines`): such a LIKE stops with the statement timeout.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from refimpl.engine.query import deadlines

Matcher = Callable[[str], bool]
CHECK_EVERY = 256  # candidates of a piece between two looks at the deadline
_FEW_CHECKS = 2  # runs checked in place by startswith; more: one compiled expression


class _Piece:
    """A run of the pattern between two `%`: literal characters and `_` (any one)."""

    __slots__ = ("text", "size", "anchor", "anchor_at", "checks", "compiled")

    def __init__(self, text: str) -> None:
        self.text = text
        self.size = len(text)
        runs = [(start, run) for start, run in _literal_runs(text)]
        # The longest literal run is what `find` looks for; the other runs are checked in
        # place at their offsets.
        self.anchor_at, self.anchor = max(runs, key=lambda r: len(r[1]), default=(0, ""))
        self.checks = [(start, run) for start, run in runs if start != self.anchor_at]
        self.compiled: re.Pattern[str] | None = None
        if len(self.checks) > _FEW_CHECKS:
            body = ".".join(re.escape(part) for part in text.split("_"))
            self.compiled = re.compile(body, re.DOTALL)

    def matches_at(self, value: str, position: int) -> bool:
        """The piece matches `value` at `position` (the caller knows it fits)."""
        if self.anchor and not value.startswith(self.anchor, position + self.anchor_at):
            return False
        if self.compiled is not None:
            return self.compiled.match(value, position) is not None
        return all(value.startswith(run, position + start) for start, run in self.checks)

    def find(self, value: str, start: int, end: int) -> int:
        """The leftmost position >= start where the piece matches within value[:end], or -1."""
        last = end - self.size  # the last position where the piece still fits
        if last < start:
            return -1
        if not self.anchor:  # only `_`: any place with room for it
            return start
        offset = self.anchor_at
        probe = start + offset
        candidates = 0
        while True:
            found = value.find(self.anchor, probe, last + offset + len(self.anchor))
            if found < 0:
                return -1
            position = found - offset
            if self.matches_at(value, position):
                return position
            probe = found + 1
            candidates += 1
            if candidates % CHECK_EVERY == 0:
                deadlines.check()


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

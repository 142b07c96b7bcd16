"""The rows of a maintained plain query, kept in the query's order: all of them, or the
first `size` (an ordered window: `ORDER BY ... LIMIT`, with its `OFFSET`).

Each row is kept under its sort key: the ORDER BY's values as `sort_rows` orders them
(NULLS LAST ascending and FIRST descending unless told), then its place in the table's
order, so equal rows keep the order a run reads them in. A window keeps only its first
`size` rows: a row of the table that is not in it sorts at or after its edge (the first
sort key a row was left out or pushed out at), so a row that comes at or after the edge
stays out. The edge stays where it was when rows leave the window: a row that sorts after
it may still come after a row outside, even in a window with room. When a row leaves a
full window and no row takes its place, the window is `short`: what comes next is known
only to the table, which is then read again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import total_ordering
from typing import Any

from sortedcontainers import SortedDict

from refimpl.sql import ast

Order = Callable[[Any], Any]


@total_ordering
class _Descending:
    """A value that sorts in the opposite order (a DESC item of an ORDER BY)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Descending) and self.value == other.value

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.value < self.value)

    def __hash__(self) -> int:
        return hash(self.value)


def sort_key(orders: Sequence[tuple[Order, ast.OrderItem]]) -> Callable[[Any, Any], tuple]:
    """`key(wide_row, place)`: where a row sorts among others, `place` (its place in table
    order) breaking ties."""
    steps = []
    for fn, order in orders:
        nulls_first = order.nulls_first
        if nulls_first is None:
            nulls_first = order.descending
        steps.append((fn, (0,) if nulls_first else (2,), order.descending))

    def key(wide: Any, place: Any) -> tuple:
        parts: list[Any] = []
        for fn, null, descending in steps:
            value = fn(wide)
            if value is None:
                parts.append(null)
            else:
                parts.append((1, _Descending(value) if descending else value))
        parts.append(place)
        return tuple(parts)

    return key


class Window:
    """Rows by sort key (the first `size` of them; None: all), each under its identity in
    the table (a key or a row id)."""

    __slots__ = ("size", "rows", "_at", "complete", "_edge")

    def __init__(self, size: int | None) -> None:
        self.size = size
        self.rows: SortedDict = SortedDict()  # sort key -> (identity, wide row)
        self._at: dict[tuple, tuple] = {}  # identity -> sort key
        # True while no row of the table that the WHERE keeps is outside the window.
        self.complete = True
        # While not complete: every such row outside the window sorts at or after this key.
        self._edge: tuple | None = None

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, ident: tuple, key: tuple, wide: tuple) -> None:
        """Take in a row the WHERE keeps (not in the window now)."""
        rows = self.rows
        edge = self._edge
        if edge is not None and key >= edge:
            # A row outside may come before it (one pushed out by this very commit, say):
            # only the table knows, and the window is short if it has room.
            return
        rows[key] = (ident, wide)
        self._at[ident] = key
        if self.size is not None and len(rows) > self.size:
            pushed, (last, _) = rows.popitem(-1)
            del self._at[last]
            self.complete = False
            if edge is None or pushed < edge:
                self._edge = pushed

    def remove(self, ident: tuple) -> bool:
        """Let the row of `ident` go; False when it was not in the window."""
        key = self._at.pop(ident, None)
        if key is None:
            return False
        del self.rows[key]
        return True

    def wide_rows(self) -> list[tuple]:
        """The wide rows in the query's order."""
        return [wide for _, wide in self.rows.values()]

    @property
    def short(self) -> bool:
        """True when rows may be missing at the window's end (only the table knows them)."""
        return self.size is not None and not self.complete and len(self.rows) < self.size

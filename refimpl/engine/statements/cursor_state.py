"""A session's cursors: each one's answer, kept from its DECLARE, and where it stands
(the statements are in `cursors`, which the statement context may not import)."""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.engine.result import Column
from refimpl.errors import UnknownCursor


@dataclass(slots=True)
class Cursor:
    """A declared cursor: its answer and where it stands (0 before the first row,
    len(rows) + 1 after the last, as PostgreSQL counts)."""

    name: str
    columns: list[Column]
    rows: list[tuple]
    hold: bool
    in_transaction: bool
    position: int = 0

    def fetch(self, direction: str, count: int | None) -> list[tuple]:
        """Move as FETCH does and answer the rows passed over (MOVE counts them)."""
        size = len(self.rows)
        if direction == "ABSOLUTE":
            assert count is not None
            target = count if count >= 0 else size + 1 + count
            self.position = min(max(target, 0), size + 1)
            return self._current()
        if direction == "RELATIVE":
            assert count is not None
            if count == 0:
                return self._current()
            direction, count = ("FORWARD", count) if count > 0 else ("BACKWARD", -count)
            rows = self._walk(1 if direction == "FORWARD" else -1, count)
            return rows[-1:]
        step = 1 if direction == "FORWARD" else -1
        if count is not None and count < 0:
            step, count = -step, -count
        return self._walk(step, size + 1 if count is None else count)

    def _walk(self, step: int, count: int) -> list[tuple]:
        rows = []
        size = len(self.rows)
        for _ in range(count):
            after = self.position + step
            if after < 1 or after > size:
                self.position = 0 if step < 0 else size + 1
                break
            self.position = after
            rows.append(self.rows[after - 1])
        return rows

    def _current(self) -> list[tuple]:
        if 1 <= self.position <= len(self.rows):
            return [self.rows[self.position - 1]]
        return []


class Cursors:
    """A session's declared cursors, by lower-cased name."""

    def __init__(self) -> None:
        self.open: dict[str, Cursor] = {}

    def get(self, name: str) -> Cursor:
        cursor = self.open.get(name.lower())
        if cursor is None:
            raise UnknownCursor(f'cursor "{name}" does not exist')
        return cursor

    def columns(self, name: str) -> list[Column]:
        """The columns a FETCH from the cursor answers (UnknownCursor if none is open)."""
        return self.get(name).columns

    def transaction_ended(self, committed: bool) -> None:
        """Close the cursors the transaction's end closes; those WITH HOLD of a commit stay
        (and belong to no transaction any more)."""
        for key, cursor in list(self.open.items()):
            if not cursor.in_transaction:
                continue
            if committed and cursor.hold:
                cursor.in_transaction = False
            else:
                del self.open[key]

    def close_all(self) -> None:
        self.open.clear()

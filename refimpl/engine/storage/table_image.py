"""A table's rows as of one moment, taken under the database's write lock in O(blocks)
(`TakenTable.of`), and its checkpoint image, made from them after the lock is let go
(`TakenTable.image`), so that a checkpoint of a big table holds no writer while it lists
the rows."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from refimpl.engine.storage import checkpoint, ddl
from refimpl.engine.storage.memory_limit import text_positions
from refimpl.engine.storage.table import Table


@dataclass(frozen=True, slots=True)
class TakenTable:
    """One table's CREATE text, row id counter and rows as of the moment it was taken."""

    create: str
    next_rowid: int
    keyed: bool
    # rows of a keyed table, else (identity, row) pairs; for a table ordered by identity,
    # its blocks (`Table.detached_parts`: chunks still encoded are written as they are, the
    # others listed by their dicts, not a generator step per row)
    rows: Iterator[Any]
    key_positions: tuple[int, ...]
    text_positions: tuple[int, ...]
    parts: bool

    @classmethod
    def of(cls, table: Table) -> TakenTable:
        """Taken under the write lock, in O(blocks)."""
        parts = table.ordered_by_identity  # its blocks' keys are the identities
        if parts:
            rows: Iterator[Any] = table.detached_parts()
        else:
            rows = table.scan() if table.keyed else table.detached_with_idents()
        return cls(
            ddl.canonical_create(table.schema),
            table.next_rowid,
            table.keyed,
            rows,
            table.layout.key_positions,
            text_positions(table.schema),
            parts,
        )

    def image(self) -> checkpoint.TableImage:
        """The table's checkpoint image; made after the lock."""
        if self.parts:
            return checkpoint.TableImage.of_parts(
                self.create,
                self.next_rowid,
                self.rows,
                self.keyed,
                self.key_positions,
                self.text_positions,
            )
        if self.keyed:
            rows, rowids = list(self.rows), None
        else:
            pairs = list(self.rows)
            rows, rowids = [row for _, row in pairs], [ident[0] for ident, _ in pairs]
        return checkpoint.TableImage.of_rows(
            self.create, self.next_rowid, rows, rowids, self.key_positions, self.text_positions
        )

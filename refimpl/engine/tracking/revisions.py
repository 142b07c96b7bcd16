"""Revisions: a cheap text per table and per value of its rev column that moves on commit.

A revision is `<boot>.<n>`: `boot` is new at every start of the server, `n` comes from one
counter per database that a commit advances. A commit sets the revision of every table it
changed, and of every value of the table's rev column held by a row it changed (before or
after the change), to the new `n`. A schema change or a partition drop moves every value of
the table. A value never written since the start has revision `<boot>.0`, so it moves when
the value first appears.

Reading a revision takes a small lock of its own, never the database lock, so it answers at
once even while a long transaction or a bulk import runs.
"""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, NamedTuple

MAX_VALUES = 10_000


def new_boot_id() -> str:
    return secrets.token_hex(6)


@dataclass(slots=True)
class TableRevisions:
    table_n: int = 0
    all_n: int = 0  # when every value last moved together
    values: dict[Any, int] = field(default_factory=dict)
    overflowed: bool = False  # more than MAX_VALUES values: every write moves every value


class Touched(NamedTuple):
    """What a commit changed in one table: the rev-column values, or everything (a named
    tuple: made for each table of every commit, where a frozen dataclass's fields cost a
    Python call each to set)."""

    values: frozenset[Any] = frozenset()
    everything: bool = False


# What a commit touched: by lower-case table name, or (name, what) of a commit of one table.
Changes = dict[str, Touched] | tuple[str, Touched]


class Revisions:
    """The revisions of one database's tables."""

    def __init__(self, boot: str) -> None:
        self.boot = boot
        self._lock = threading.Lock()
        self._n = 0
        self._tables: dict[str, TableRevisions] = {}

    def advance(self, changes: dict[str, Touched]) -> None:
        """Record one commit: `changes` maps lower-case table names to what it touched."""
        if not changes:
            return
        with self._lock:
            self._n += 1
            n = self._n
            for table, touched in changes.items():
                self._move(table, touched, n)

    def advance_one(self, table: str, touched: Touched) -> None:
        """`advance({table: touched})`: a commit of one table (every one-row INSERT), with
        no dict made for it nor a loop over one."""
        with self._lock:
            self._n += 1
            n = self._n
            revisions = self._tables.get(table)
            if revisions is not None and (touched.everything or revisions.overflowed):
                # What `_move` does to such a table (every commit of one without rev column).
                revisions.table_n = revisions.all_n = n
                return
            self._move(table, touched, n)

    def _move(self, table: str, touched: Touched, n: int) -> None:
        """Table `table`'s counters, and those of the values `touched`, set to `n` (the
        lock held)."""
        revisions = self._tables.get(table)
        if revisions is None:  # not made at every commit only for setdefault to drop
            revisions = self._tables[table] = TableRevisions()
        revisions.table_n = n
        if touched.everything or revisions.overflowed:
            revisions.all_n = n
            return
        known = revisions.values
        for value in touched.values:
            known[value] = n
        if len(known) > MAX_VALUES:
            revisions.overflowed = True
            revisions.values = {}
            revisions.all_n = n

    def table_rev(self, table: str) -> str:
        with self._lock:
            revisions = self._tables.get(table.lower())
            return f"{self.boot}.{revisions.table_n if revisions else 0}"

    def table_n(self, table: str) -> int:
        with self._lock:
            revisions = self._tables.get(table.lower())
            return revisions.table_n if revisions else 0

    def value_n(self, table: str, value: Any) -> int:
        """The counter behind a value's revision (a table without rev column: the table's)."""
        with self._lock:
            return self._value_n_locked(table.lower(), value)

    def _value_n_locked(self, table: str, value: Any) -> int:
        revisions = self._tables.get(table)
        if revisions is None:
            return 0
        return max(revisions.values.get(value, 0), revisions.all_n)

    def value_revs(self, table: str, values: list[Any]) -> dict[Any, str]:
        with self._lock:
            key = table.lower()
            return {v: f"{self.boot}.{self._value_n_locked(key, v)}" for v in values}

    def kept_values(self) -> int:
        """How many per-value revisions are kept (rev_values in /api/stats)."""
        with self._lock:
            return sum(len(r.values) for r in self._tables.values())

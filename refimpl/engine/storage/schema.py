"""A table's schema: columns, keys, time partitioning and sort order.

The schema decides three things about a row:
- its identity (`ident`): the PRIMARY KEY, else the DEDUP KEY, else a row id the table hands
  out (such a table may hold equal rows);
- its partition: the time period of its TIMESERIES column (PARTITION BY YEAR|MONTH|DAY), and
  the value of the `SYMBOL(col)` column when there is one;
- its place inside the partition (`order`): the SORT BY columns (default: the TIMESERIES
  column), then the identity.
Rows of a table are read in (partition, order) order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from itertools import repeat
from operator import floordiv

from refimpl.errors import DuplicateColumn, SqlError, TypeMismatch, UnknownColumn
from refimpl.sql import ast

_MICROS_PER_DAY = 86_400_000_000


@dataclass(frozen=True, slots=True)
class TableSchema:
    """An immutable schema; ALTER TABLE makes a new one.

    Its fields (all but `positions`) are those of `ast.CreateTable` but IF NOT EXISTS, of the
    same names: the statement is the one definition of a table, copied field by field.
    """

    name: str
    columns: tuple[ast.ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    timeseries: str | None = None
    partition_by: str | None = None
    partition_symbol: str | None = None
    sort_by: tuple[str, ...] = ()
    dedup_key: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    indexes: tuple[ast.IndexDef, ...] = ()
    replica_identity_full: bool = False  # the log keeps before-images (spec: changefeeds)
    positions: dict[str, int] = field(default_factory=dict, init=False, compare=False, hash=False)
    # Worked out once, not at each commit that reads them (every INSERT's seal does).
    column_names: tuple[str, ...] = field(
        default=(), init=False, repr=False, compare=False, hash=False
    )
    # The column whose values have revisions of their own (spec: revisions), if any: the
    # SYMBOL(col) partition column, else the first SYMBOL column of the key.
    rev_column: str | None = field(default=None, init=False, repr=False, compare=False, hash=False)

    def __post_init__(self) -> None:
        positions: dict[str, int] = {}
        for index, column in enumerate(self.columns):
            lowered = column.name.lower()
            if lowered in positions:
                raise DuplicateColumn(f"column '{column.name}' is defined twice")
            positions[lowered] = index
        object.__setattr__(self, "positions", positions)
        object.__setattr__(self, "column_names", tuple(c.name for c in self.columns))
        rev_column = self.partition_symbol or None
        if rev_column is None:
            # A key column the table lacks is left to `_validate`, which names it.
            types = {name: self.columns[n].type for name, n in positions.items()}
            keys = self.primary_key or self.dedup_key
            rev_column = next((k for k in keys if types.get(k.lower()) == "SYMBOL"), None)
        object.__setattr__(self, "rev_column", rev_column)

    # -- building ------------------------------------------------------------------------

    @classmethod
    def from_create(cls, statement: ast.CreateTable) -> TableSchema:
        """The schema of a CREATE TABLE, checked: every named column exists and fits."""
        schema = cls(**{name: getattr(statement, name) for name in DEFINITION_FIELDS})
        schema._validate()
        return schema

    def _validate(self) -> None:
        named = [*self.primary_key, *self.sort_by, *self.dedup_key]
        named += [c for c in (self.timeseries, self.partition_symbol) if c]
        named += [c for index in self.all_indexes() for c in index.columns]
        for name in named:
            self.position(name)
        seen: set[str] = set()
        for index in self.indexes:
            if index.name.lower() in seen:
                raise SqlError(f"table '{self.name}' has two indexes named '{index.name}'")
            seen.add(index.name.lower())
        for index in self.all_indexes():
            if len({c.lower() for c in index.columns}) != len(index.columns):
                raise SqlError(f"{index.name} names a column twice")
        if self.primary_key and self.dedup_key:
            raise SqlError(
                f"table '{self.name}' has both a PRIMARY KEY and a DEDUP KEY; keep one of them"
            )
        if self.timeseries and self.type_of(self.timeseries) != "TIMESTAMP":
            raise TypeMismatch(f"TIMESERIES column '{self.timeseries}' must be a TIMESTAMP")
        if self.partition_by not in (None, "NONE") and not self.timeseries:
            raise SqlError(
                f"PARTITION BY {self.partition_by} needs a TIMESERIES(column) to partition by"
            )
        if self.partition_symbol and self.type_of(self.partition_symbol) not in (
            "SYMBOL",
            "STRING",
        ):
            raise TypeMismatch(
                f"SYMBOL({self.partition_symbol}) partitions by a SYMBOL or STRING column"
            )

    def to_create(self) -> ast.CreateTable:
        """The CREATE TABLE statement that makes this schema (for SHOW CREATE TABLE)."""
        return ast.CreateTable(**{name: getattr(self, name) for name in DEFINITION_FIELDS})

    def all_indexes(self) -> tuple[ast.IndexDef, ...]:
        """The declared indexes, then one UNIQUE index per UNIQUE constraint (named by it)."""
        constraints = tuple(
            ast.IndexDef(f"UNIQUE ({', '.join(columns)})", columns, True) for columns in self.unique
        )
        return (*self.indexes, *constraints)

    def with_index(self, index: ast.IndexDef) -> TableSchema:
        schema = replace(self, indexes=(*self.indexes, index))
        schema._validate()
        return schema

    def without_index(self, name: str) -> TableSchema:
        lowered = name.lower()
        return replace(self, indexes=tuple(i for i in self.indexes if i.name.lower() != lowered))

    def with_column(self, column: ast.ColumnDef) -> TableSchema:
        if column.name.lower() in self.positions:
            raise DuplicateColumn(f"column '{column.name}' already exists in table '{self.name}'")
        return replace(self, columns=(*self.columns, column))

    def without_column(self, name: str) -> TableSchema:
        position = self.position(name)
        column = self.columns[position].name
        lowered = column.lower()
        roles = [
            ("PRIMARY KEY", self.primary_key),
            ("DEDUP KEY", self.dedup_key),
            ("SORT BY", self.sort_by),
            ("TIMESERIES", (self.timeseries,) if self.timeseries else ()),
            ("SYMBOL partition", (self.partition_symbol,) if self.partition_symbol else ()),
        ]
        roles += [(f"index {index.name}", index.columns) for index in self.all_indexes()]
        for role, names in roles:
            if lowered in (n.lower() for n in names):
                raise SqlError(
                    f"column '{column}' is part of the table's {role} and cannot be dropped"
                )
        if len(self.columns) == 1:
            raise SqlError(f"column '{column}' is the last column of table '{self.name}'")
        kept = tuple(c for i, c in enumerate(self.columns) if i != position)
        return replace(self, columns=kept)

    # -- lookups -------------------------------------------------------------------------

    def position(self, name: str) -> int:
        try:
            return self.positions[name.lower()]
        except KeyError:
            raise UnknownColumn(name, self.name) from None

    def type_of(self, name: str) -> str:
        return self.columns[self.position(name)].type

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns that identify a row; empty when the table hands out row ids."""
        return self.primary_key or self.dedup_key

    def layout(self) -> RowLayout:
        return RowLayout.of(self)


# The fields a schema shares with the CREATE TABLE statement that makes it (its indexes too).
DEFINITION_FIELDS = tuple(f.name for f in fields(TableSchema) if f.init)


@dataclass(frozen=True, slots=True)
class RowLayout:
    """Positions the storage needs, computed once per schema."""

    key_positions: tuple[int, ...]
    order_positions: tuple[int, ...]
    time_position: int | None
    period: str | None  # None, YEAR, MONTH or DAY
    symbol_position: int | None
    not_null: tuple[tuple[int, str], ...]
    # The column every order key begins with by its plain value (never NULL): its first
    # ordering column, or its first key column when it has none; None otherwise. A range on
    # it lets a read start and stop inside each partition.
    lead_position: int | None

    @classmethod
    def of(cls, schema: TableSchema) -> RowLayout:
        order = schema.sort_by or ((schema.timeseries,) if schema.timeseries else ())
        not_null = {*schema.key_columns, *([schema.timeseries] if schema.timeseries else [])}
        lead = order[0] if order else (schema.key_columns[0] if schema.key_columns else None)
        lead_position = None if lead is None else schema.position(lead)
        if lead_position not in {schema.position(n) for n in not_null}:
            lead_position = None  # a column that may be NULL is ordered as (is NULL, value)
        return cls(
            key_positions=tuple(schema.position(n) for n in schema.key_columns),
            order_positions=tuple(schema.position(n) for n in order),
            time_position=schema.position(schema.timeseries) if schema.timeseries else None,
            period=schema.partition_by if schema.partition_by not in (None, "NONE") else None,
            symbol_position=(
                schema.position(schema.partition_symbol) if schema.partition_symbol else None
            ),
            not_null=tuple(
                (schema.position(n), schema.columns[schema.position(n)].name)
                for n in sorted(not_null)
            ),
            lead_position=lead_position,
        )


def period_of(micros: int, period: str) -> str:
    """The partition name of a time: '2026' (YEAR), '2026-09' (MONTH), '2026-09-24' (DAY)."""
    return _period_name(micros // _MICROS_PER_DAY, period)


def periods_of(times: Iterable[int], period: str) -> Iterator[str]:
    """`period_of` of each time, without a Python call per time: a name is worked out once
    for each day among them."""
    days = list(map(floordiv, times, repeat(_MICROS_PER_DAY)))
    names = {day: _period_name(day, period) for day in set(days)}
    return map(names.__getitem__, days)


@lru_cache(maxsize=4096)
def _period_name(days: int, period: str) -> str:
    # Every row written is placed by its period: the rows of one import or one day share a
    # few names, worked out once each (a pure function of its arguments).
    year, month, day = _civil_from_days(days)
    if period == "YEAR":
        return f"{year:04d}"
    if period == "MONTH":
        return f"{year:04d}-{month:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant)."""
    z = days + 719468
    era = (z if z >= 0 else z - 146096) // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return (y + 1 if m <= 2 else y), m, d

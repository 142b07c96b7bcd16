"""What a query's WHERE clause tells a table scan it may skip (planned by the query layer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.storage.indexes import Bound

if TYPE_CHECKING:
    from refimpl.engine.storage.table import Row, Table


@dataclass(frozen=True, slots=True)
class IndexProbe:
    """A read through a secondary index: equal values on its first columns, then maybe a
    range on the next one. The WHERE clause is still applied to the rows it gives."""

    name: str  # the index's lower-case name
    columns: tuple[str, ...]  # the columns the probe constrains, in index order
    prefix: tuple[Any, ...]
    low: Bound | None = None
    high: Bound | None = None

    def rows(self, table: Table) -> list[Row]:
        """The rows the probe finds, in table order (as a scan would give them)."""
        index = table.secondary.get(self.name)
        if index is None:
            return list(table.scan())
        return table.rows_of(index.search(self.prefix, self.low, self.high))


@dataclass(frozen=True, slots=True)
class AccessHints:
    """What the WHERE clause lets a source skip: a point identity, an index probe, periods,
    a symbol, a range of the table's leading column (`RowLayout.lead_position`)."""

    ident: tuple[Any, ...] | None = None
    low_period: str | None = None
    high_period: str | None = None
    symbol: tuple[bool, str] | None = None
    time_low: int | None = None  # inclusive bounds on the TIMESERIES column, in micros
    time_high: int | None = None
    index: IndexProbe | None = None
    # Inclusive bounds on the leading column when it holds integers (timestamps in micros
    # included): a read starts and stops there in each partition. The same column as the
    # time bounds' when the table is ordered by its TIMESERIES column first.
    lead_low: int | None = None
    lead_high: int | None = None

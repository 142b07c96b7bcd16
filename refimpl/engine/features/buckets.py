"""Re-running a time-bucketed live query only for the buckets a commit changed.

A candle query groups by `date_trunc(unit, <timeseries column>)`. After a commit, only the
buckets holding changed rows can have changed answers: the log after the answer's position
names those rows, and the query runs again over the rows of those buckets only
(`run_buckets`: each bucket's time range read from its partitions, never the time between
two changed buckets). Anything the log cannot place in a bucket (a DDL, a delete whose key
has no time) asks for a full run instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.features.recent_records import records_through
from refimpl.engine.query.functions import truncate_timestamp
from refimpl.engine.query.select import QueryOutput, run_select
from refimpl.engine.statements.executor import now_micros
from refimpl.engine.statements.queries import CommittedTable
from refimpl.engine.storage import records
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.engine.storage.schema import TableSchema, period_of
from refimpl.engine.storage.table import Table
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext
    from refimpl.engine.storage.database import Database

# Units of a fixed length; month and year buckets always run in full.
UNIT_MICROS = {
    "second": 1_000_000,
    "minute": 60_000_000,
    "hour": 3_600_000_000,
    "day": 86_400_000_000,
    "week": 7 * 86_400_000_000,
}


@dataclass(frozen=True, slots=True)
class BucketPlan:
    unit: str
    identity_index: int  # where the bucket stands in a row's identity
    time_column: str
    key_time_index: int | None  # where the time stands in the table's key (for deletes)


def bucket_plan(
    select: ast.Select, schema: TableSchema, positions: list[int] | None
) -> BucketPlan | None:
    """How to re-run `select` per bucket, or None when it cannot be (then: full runs)."""
    if positions is None or not select.group_by or select.limit is not None:
        return None
    if select.offset is not None or schema.timeseries is None:
        return None
    time_name = schema.timeseries.lower()
    for identity_index, position in enumerate(positions):
        expr = select.items[position].expr
        if not (isinstance(expr, ast.FuncCall) and expr.name == "date_trunc"):
            continue
        if len(expr.args) != 2:
            continue
        unit_arg, time_arg = expr.args
        if not (isinstance(unit_arg, ast.Literal) and isinstance(unit_arg.value, str)):
            continue
        unit = unit_arg.value.lower()
        if unit not in UNIT_MICROS:
            continue
        if not (isinstance(time_arg, ast.ColumnRef) and time_arg.name.lower() == time_name):
            continue
        key = [k.lower() for k in schema.key_columns]
        key_time = key.index(time_name) if time_name in key else None
        return BucketPlan(unit, identity_index, schema.timeseries, key_time)
    return None


def changed_buckets(
    database: Database,
    table: str,
    schema: TableSchema,
    plan: BucketPlan,
    after_lsn: int,
    rowid_floor: int | None = None,
    upto_lsn: int | None = None,
) -> set[int] | None:
    """Starts of the buckets changed after `after_lsn` (up to `upto_lsn`, the state the
    caller's answer is marked with: read from the log's newest records in memory, maybe not
    durable yet, as `recent_records.records_through` says; without it, the log must be
    durable as far as it reads); None when a full run is needed.

    For a table without key, `rowid_floor` tells inserts (new row ids) from updates (an id
    below it): an update may have moved a row out of a bucket the log does not name.
    """
    buckets: set[int] = set()
    wanted = table.lower()
    log = database.log
    logged = log.read(after_lsn) if upto_lsn is None else records_through(log, after_lsn, upto_lsn)
    for lsn, payload in logged:
        if upto_lsn is not None and lsn > upto_lsn:
            break  # a later commit: the answer's next run reads it
        for entry in records.decode(lsn, payload).entries:
            if entry.table is None or entry.table.lower() != wanted:
                continue
            if entry.kind == records.UPSERT:
                columns, rows, rowids = entry.payload
                index = _index_of(columns, plan.time_column)
                if index is None:
                    return None
                if rowids is not None and (
                    rowid_floor is None or any(r < rowid_floor for r in rowids)
                ):
                    return None
                for row in rows:
                    buckets.add(truncate_timestamp(plan.unit, row[index]))
            elif entry.kind == records.DELETE and plan.key_time_index is not None:
                for _part, ident in entry.payload[0]:
                    buckets.add(truncate_timestamp(plan.unit, ident[plan.key_time_index]))
            else:
                return None
    return buckets


def _index_of(columns: list[str], name: str) -> int | None:
    lowered = name.lower()
    for index, column in enumerate(columns):
        if column.lower() == lowered:
            return index
    return None


def bucket_ranges(plan: BucketPlan, buckets: Collection[int]) -> list[tuple[int, int]]:
    """The time ranges (inclusive micros) of `buckets`, in order, adjacent ones joined."""
    width = UNIT_MICROS[plan.unit]
    ranges: list[tuple[int, int]] = []
    for start in sorted(buckets):
        if ranges and ranges[-1][1] + 1 == start:
            ranges[-1] = (ranges[-1][0], start + width - 1)
        else:
            ranges.append((start, start + width - 1))
    return ranges


def merged(
    previous: dict[tuple, tuple],
    plan: BucketPlan,
    buckets: Collection[int],
    rows: Sequence[tuple],
    identity: Callable[[tuple], tuple],
) -> dict[tuple, tuple]:
    """`previous` (identity -> row) with the groups of `buckets` replaced by `rows` (their
    re-run's answer)."""
    index = plan.identity_index
    kept = {i: r for i, r in previous.items() if i[index] not in buckets}
    for row in rows:
        kept[identity(row)] = row
    return kept


class _BucketRows:
    """A committed table as a SELECT source that gives only the rows within some time ranges:
    each range is read from the partitions of its periods, from its first row to its last
    where the table keeps time order (the caller holds the state lock)."""

    def __init__(self, table: Table, alias: str | None, ranges: list[tuple[int, int]]) -> None:
        self._inner = CommittedTable(table, alias)
        self.columns = self._inner.columns
        self.qualifier = self._inner.qualifier
        self.schema: TableSchema | None = self._inner.schema
        self._ranges = ranges
        time = table.layout.time_position
        assert time is not None  # buckets are ranges of a TIMESERIES table's time
        self._time = time
        self._period = table.layout.period
        # A table ordered by its time first reads each bucket's range, not every row.
        self._time_leads = table.layout.lead_position == time

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        time = self._time
        for low, high in self._ranges:
            # The query's own bounds on the time narrow each range further.
            if hints.time_low is not None:
                low = max(low, hints.time_low)
            if hints.time_high is not None:
                high = min(high, hints.time_high)
            if low > high:
                continue
            periods: tuple[str | None, str | None] = (None, None)
            if self._period is not None:
                periods = (period_of(low, self._period), period_of(high, self._period))
            narrowed = dataclasses.replace(
                hints,
                time_low=low,
                time_high=high,
                low_period=periods[0],
                high_period=periods[1],
            )
            if self._time_leads:
                narrowed = dataclasses.replace(narrowed, lead_low=low, lead_high=high)
            for row in self._inner.rows(narrowed):
                value = row[time]
                if value is not None and low <= value <= high:
                    yield row


def run_buckets(
    session: StatementContext, select: ast.Select, plan: BucketPlan, buckets: Collection[int]
) -> QueryOutput:
    """`select`'s answer over the rows of `buckets` only: the rows of the groups of those
    buckets (the caller has checked the right to read the table)."""
    source = select.source
    assert isinstance(source, ast.TableSource)
    database = session.database
    with database.state_lock:
        table = database.committed_table(source.name)
        rows = _BucketRows(table, source.alias, bucket_ranges(plan, buckets))
        return run_select(
            select,
            rows,
            (),
            now_micros(),
            session.sql_functions(),
            session.deadline(),
            plans=database.plan_cache,
        )

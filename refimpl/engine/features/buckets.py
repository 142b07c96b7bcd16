"""Re-running a time-bucketed live query only for the buckets a commit changed.

A candle query groups by `date_trunc(unit, <timeseries column>)`. After a commit, only the
buckets holding changed rows can have changed answers: the log after the answer's position
names those rows, and the query runs again restricted to that time range (which also prunes
partitions). Anything the log cannot place in a bucket (a DDL, a delete whose key has no
time) asks for a full run instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from refimpl.engine.query.functions import truncate_timestamp
from refimpl.engine.storage import records
from refimpl.engine.storage.schema import TableSchema
from refimpl.sql import ast

if TYPE_CHECKING:
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
) -> set[int] | None:
    """Starts of the buckets changed after `after_lsn`; None when a full run is needed.

    For a table without key, `rowid_floor` tells inserts (new row ids) from updates (an id
    below it): an update may have moved a row out of a bucket the log does not name.
    """
    buckets: set[int] = set()
    wanted = table.lower()
    for lsn, payload in database.log.read(after_lsn):
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


def restricted(select: ast.Select, plan: BucketPlan, buckets: set[int]) -> ast.Select:
    """`select` with its WHERE narrowed to the time range of `buckets`."""
    low = min(buckets)
    high = max(buckets) + UNIT_MICROS[plan.unit] - 1
    time = ast.ColumnRef(plan.time_column)
    span = ast.Between(
        time, ast.Cast(ast.Literal(low, "INT"), "TIMESTAMP"),
        ast.Cast(ast.Literal(high, "INT"), "TIMESTAMP"),
    )
    where = span if select.where is None else ast.Binary("AND", select.where, span)
    return ast.Select(
        items=select.items,
        source=select.source,
        where=where,
        group_by=select.group_by,
        having=select.having,
        order_by=(),
        distinct=select.distinct,
    )


"""/imp (CSV) and /write (line protocol): rows in, each request one transaction."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import IO

from werkzeug.wrappers import Response

from refimpl.engine import admission
from refimpl.engine.access import ADMIN as ADMIN_PRINCIPAL
from refimpl.engine.access import Right
from refimpl.engine.result import Column
from refimpl.engine.session import Session
from refimpl.engine.storage import bulk, values
from refimpl.errors import BadRequest, LineError, NotFound, UnknownTable
from refimpl.http import csvimport, lineproto
from refimpl.http.context import Context
from refimpl.http.encode import Answer, json_response
from refimpl.waiting.parked import Parked


@dataclass(frozen=True, slots=True)
class TableShape:
    columns: list[Column]
    timeseries: str | None


def table_shape(session: Session, table: str) -> TableShape | None:
    """The columns of a table as the engine reports them, None when there is no such table."""
    if not lineproto.NAME.match(table):
        raise BadRequest(f"'{table}' is not a table name; use letters, digits and _")
    try:
        result = session.execute(f"SHOW COLUMNS FROM {table}", ())
    except UnknownTable:
        return None
    names = [c.name for c in result.columns or []]
    name_i, type_i, ts_i = names.index("column"), names.index("type"), names.index("timeseries")
    columns = [Column(row[name_i], row[type_i]) for row in result.rows]
    timeseries = next((row[name_i] for row in result.rows if row[ts_i]), None)
    return TableShape(columns, timeseries)


def import_route(ctx: Context) -> Answer | Parked[Answer]:
    table = ctx.require("table")
    ctx.app.instance.access.check(ctx.principal, ctx.database, Right.WRITE)
    body = _import_body(ctx)
    with ctx.session(acknowledge_later=True) as session:
        shape = table_shape(session, table)
        if shape is None:
            raise NotFound(f"table '{table}' does not exist in database '{ctx.database}'")
        rows = csvimport.CsvImport(body, shape.columns, table)
        # The whole body is read and converted before the write lock is taken, so other
        # writers wait for the install only, never for the parse; a bad line stops the import
        # before anything is written. The rows then commit as one statement: all or nothing.
        # Converted here for the table's column types: the insert does not convert again.
        parsed = values.TypedRows(
            (column.type for column in shape.columns),
            columns=(column.name for column in shape.columns),
        )
        # The rows are new objects that live as long as the table: the collector, paused
        # from the first row to the install, does not stop the server to look at them; and
        # threads woken meanwhile get the interpreter lock sooner (`bulk.quick_switches`).
        with bulk.collector_paused(), bulk.quick_switches():
            for batch in rows.batches():
                parsed += batch
                # A long import moves to the server's long place (or runs without one), so
                # that the places of cheap requests (/api/rev, point reads) are never all
                # taken by imports; no engine lock is held here.
                admission.running_long()
            count = _load(session, table, rows.columns, parsed)
            bulk.freeze_if_many(count)
    answer = {"table": table, "count": count, "message": f"{count} row(s) inserted"}
    return ctx.when_durable(session, json_response(answer))


def _load(session: Session, table: str, columns: list[str], rows: values.TypedRows) -> int:
    """Insert an import's rows as one transaction; the count inserted.

    New rows into a plain table load by `Database.load_rows`, prepared while other writers
    commit; any other import (triggers, indexes, a key already held, a bad value) goes the
    ordinary way, which reports its errors.
    """
    if not rows:
        return 0
    session.authorize(Right.WRITE, table)
    loaded = session.database.load_rows(table, rows)
    if loaded is None:
        return session.insert_rows(table, columns, rows)
    count, lsn = loaded
    # The table holds the rows now, not their list: let go a slice at a time, not in one
    # step over a million of them that every other thread would wait out.
    bulk.let_go(rows)
    # Acknowledged once durable, as a commit of the session's own is.
    session.durable_needed = max(session.durable_needed, lsn)
    return count


def _import_body(ctx: Context) -> IO[bytes]:
    """The CSV as a stream, read as it is parsed (the server spools large bodies to disk)."""
    request = ctx.request
    if request.mimetype == "multipart/form-data":
        # QuestDB's form: curl -F data=@file.csv
        files = ctx.app.read_files(request)
        upload = files.get("data")
        if upload is None or set(files) - {"data"}:
            raise BadRequest("send the CSV as the form file 'data', or as the request body")
        return upload.stream
    if request.mimetype not in ("", "text/csv", "text/plain", "application/octet-stream"):
        raise BadRequest(f"content type '{request.mimetype}' is not taken here; send text/csv")
    return request.stream


def write_route(ctx: Context) -> Response | Answer | Parked[Answer]:
    ctx.app.instance.access.check(ctx.principal, ctx.database, Right.WRITE)
    points = lineproto.parse_lines(ctx.body_text(), ctx.args.get("precision", "n"))
    if not points:
        return Response(status=204)
    now = time.time_ns() // 1000
    # WRITE is enough to grow the schema through /write (new tables, new columns), as line
    # protocol clients expect: the checked request runs its own DDL as the admin.
    with ctx.session(principal=ADMIN_PRINCIPAL, acknowledge_later=True) as session:
        plans = _plan_writes(session, points, now)
        session.execute("BEGIN", ())
        for plan in plans:
            for statement in plan.ddl:
                session.execute(statement, ())
        for plan in plans:
            session.insert_rows(plan.table, plan.columns, plan.rows)
        session.execute("COMMIT", ())
    no_content = Answer(b"", 204, "text/plain; charset=utf-8")
    no_content.headers = no_content.headers[:1]  # a 204 sends no Content-Length
    return ctx.when_durable(session, no_content)


@dataclass(slots=True)
class _WritePlan:
    table: str
    ddl: list[str]
    columns: list[str]
    rows: list[tuple]


# Which line-protocol value kinds a column of each type takes.
_FITS: dict[str, set[str]] = {
    "SYMBOL": {"SYMBOL", "STRING"},
    "STRING": {"SYMBOL", "STRING"},
    "DOUBLE": {"DOUBLE", "BIGINT"},
    "BIGINT": {"BIGINT"},
    "INT": {"BIGINT"},
    "BOOLEAN": {"BOOLEAN"},
}


def _plan_writes(session: Session, points: list[lineproto.Point], now: int) -> list[_WritePlan]:
    """Check every point against its table first, so a bad line changes nothing."""
    by_table: dict[str, list[lineproto.Point]] = {}
    for point in points:
        by_table.setdefault(point.table.casefold(), []).append(point)
    plans = []
    for group in by_table.values():
        table = group[0].table
        shape = table_shape(session, table)
        types = {c.name.casefold(): c for c in shape.columns} if shape else {}
        new: dict[str, Column] = {}
        ts_column = shape.timeseries if shape else None
        if ts_column is None:
            ts_column = lineproto.TIMESTAMP_COLUMN
            if ts_column not in types:
                new[ts_column] = Column(ts_column, "TIMESTAMP")
        order: list[str] = [ts_column]
        for point in group:
            for name, (kind, _value) in point.values.items():
                key = name.casefold()
                column = types.get(key) or new.get(key)
                if column is None:
                    new[key] = column = Column(name, kind)
                    order.append(name)
                elif kind not in _FITS.get(column.type, set()):
                    raise LineError(
                        point.line,
                        point.columns[name],
                        f"'{name}' is a {column.type} column and cannot take a {kind} value",
                    )
                elif column.name not in order:
                    order.append(column.name)
        index = {name.casefold(): i for i, name in enumerate(order)}
        rows = []
        for point in group:
            row: list[object] = [None] * len(order)
            row[0] = point.timestamp if point.timestamp is not None else now
            for name, (_kind, value) in point.values.items():
                column = types.get(name.casefold()) or new[name.casefold()]
                row[index[name.casefold()]] = float(value) if column.type == "DOUBLE" else value
            rows.append(tuple(row))
        plans.append(_WritePlan(table, _ddl(table, shape, new), order, rows))
    return plans


def _ddl(table: str, shape: TableShape | None, new: dict[str, Column]) -> list[str]:
    if shape is None:
        ts = lineproto.TIMESTAMP_COLUMN
        columns = ", ".join(f"{c.name} {c.type}" for c in new.values())
        return [f"CREATE TABLE IF NOT EXISTS {table} ({columns}) TIMESERIES({ts}) PARTITION BY DAY"]
    return [f"ALTER TABLE {table} ADD COLUMN {c.name} {c.type}" for c in new.values()]

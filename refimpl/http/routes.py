"""The routes: each a plain function from a request context to a response.

They read parameters and bodies, call the engine, and shape its answers; no SQL or storage
logic lives here. `ROUTES` lists every route with its methods and the query parameters it
takes, so that an unknown parameter is refused before anything runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from refimpl.engine.access import ADMIN as ADMIN_PRINCIPAL
from refimpl.engine.access import WRITE, Principal
from refimpl.engine.result import Column
from refimpl.errors import BadRequest, KdbError, NotFound, UnknownDatabase, UnknownTable
from refimpl.http import csvimport, lineproto
from refimpl.http.changes import changes_route
from refimpl.http.deferred import Deferred
from refimpl.http.durability import acknowledge_when_durable
from refimpl.http.encode import Answer, csv_chunks, json_response, result_body
from refimpl.http.errors import to_response
from refimpl.http.revisions import rev_route
from refimpl.http.subscribe import subscribe_route

if TYPE_CHECKING:
    from refimpl.http.app import App

DEFAULT_DATABASE = "demo"


@dataclass(slots=True)
class Context:
    """One request as the routes see it: checked parameters and who is asking."""

    app: App
    request: Request
    args: dict[str, str]
    principal: Principal

    @property
    def database(self) -> str:
        return self.args.get("db", DEFAULT_DATABASE)

    @contextmanager
    def session(self) -> Iterator[Any]:
        """An engine session for this request; closing it rolls back what was not committed."""
        session = self.app.instance.session(database=self.database, principal=self.principal)
        try:
            yield session
        finally:
            session.close()

    def body_text(self) -> str:
        return decode_utf8(self.app.read_body(self.request))

    def require(self, name: str) -> str:
        value = self.args.get(name)
        if value is None or not value.strip():
            raise BadRequest(f"the parameter '{name}' is required")
        return value


def decode_utf8(data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"the body is not valid UTF-8 (byte {exc.start + 1})") from None


# --- SQL ----------------------------------------------------------------------------------


def _sql_of(ctx: Context) -> str:
    """The SQL of /exec: the `query` parameter, the body, or the form field `query`."""
    request = ctx.request
    from_url = ctx.args.get("query")
    from_body: str | None = None
    if request.method == "POST":
        if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
            form = ctx.app.read_form(request)
            unknown = sorted(set(form) - {"query"})
            if unknown:
                raise BadRequest(f"unknown form field(s): {', '.join(unknown)}; send 'query'")
            from_body = form.get("query")
        elif request.mimetype in ("", "text/plain", "application/sql"):
            from_body = ctx.body_text() or None
        else:
            raise BadRequest(
                f"content type '{request.mimetype}' is not taken here; send the SQL as"
                " text/plain, or as the form field 'query'"
            )
    if from_url is not None and from_body is not None:
        raise BadRequest("send the SQL once: in the query parameter or in the body, not both")
    sql = from_url if from_url is not None else from_body
    if sql is None or not sql.strip():
        raise BadRequest("no SQL; send it in the 'query' parameter or as the request body")
    return sql


def exec_route(ctx: Context) -> Response | Answer | Deferred:
    sql = _sql_of(ctx)
    with ctx.session() as session:
        # The answer waits for the flush, not the worker: see refimpl.http.durability.
        session.defer_durability = True
        try:
            answer = json_response(result_body(session.execute(sql, ()), sql))
        except KdbError as error:
            if not session.durable_needed:
                raise
            answer = to_response(error)  # a script's earlier commits: still wait for them
    if not session.durable_needed:
        return answer
    app = ctx.app
    return acknowledge_when_durable(
        app.waiting_room, app.flusher, session.database, session.durable_needed, answer
    )


def export_route(ctx: Context) -> Response:
    sql = ctx.require("query")
    _refuse_changes(sql)
    with ctx.session() as session:
        result = session.execute(sql, ())
    if result.columns is None:
        raise BadRequest("/exp exports the rows of a query; run other statements with /exec")
    return Response(csv_chunks(result), content_type="text/csv; charset=utf-8")


def _refuse_changes(sql: str) -> None:
    """/exp is for reading: refuse anything that is not a query before it runs."""
    from refimpl.sql import ast
    from refimpl.sql.parser import parse

    readers = (ast.Select, ast.ShowTables, ast.ShowColumns, ast.ShowCreateTable)
    readers += (ast.ShowUsers, ast.ShowGrants)
    script = parse(sql)
    for statement in script.statements:
        if not isinstance(statement, readers):
            raise BadRequest(
                f"/exp runs queries only, not {type(statement).__name__}; use /exec for it"
            )


# --- Import and line protocol ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TableShape:
    columns: list[Column]
    timeseries: str | None


def table_shape(session: Any, table: str) -> TableShape | None:
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


def import_route(ctx: Context) -> Response:
    table = ctx.require("table")
    ctx.app.instance.access.check(ctx.principal, ctx.database, WRITE)
    text = _import_body(ctx)
    with ctx.session() as session:
        shape = table_shape(session, table)
        if shape is None:
            raise NotFound(f"table '{table}' does not exist in database '{ctx.database}'")
        columns, rows = csvimport.parse_csv(text, shape.columns, table)
        if rows:
            session.insert_rows(table, columns, rows)
    count = len(rows)
    return json_response({"table": table, "count": count, "message": f"{count} row(s) inserted"})


def _import_body(ctx: Context) -> str:
    request = ctx.request
    if request.mimetype == "multipart/form-data":
        # QuestDB's form: curl -F data=@file.csv
        files = ctx.app.read_files(request)
        upload = files.get("data")
        if upload is None or set(files) - {"data"}:
            raise BadRequest("send the CSV as the form file 'data', or as the request body")
        return decode_utf8(upload.read())
    if request.mimetype not in ("", "text/csv", "text/plain", "application/octet-stream"):
        raise BadRequest(f"content type '{request.mimetype}' is not taken here; send text/csv")
    return ctx.body_text()


def write_route(ctx: Context) -> Response:
    ctx.app.instance.access.check(ctx.principal, ctx.database, WRITE)
    points = lineproto.parse_lines(ctx.body_text(), ctx.args.get("precision", "n"))
    if not points:
        return Response(status=204)
    now = time.time_ns() // 1000
    # WRITE is enough to grow the schema through /write (new tables, new columns), as line
    # protocol clients expect: the checked request runs its own DDL as the admin.
    session = ctx.app.instance.session(database=ctx.database, principal=ADMIN_PRINCIPAL)
    with closing(session):
        plans = _plan_writes(session, points, now)
        session.execute("BEGIN", ())
        for plan in plans:
            for statement in plan.ddl:
                session.execute(statement, ())
        for plan in plans:
            session.insert_rows(plan.table, plan.columns, plan.rows)
        session.execute("COMMIT", ())
    return Response(status=204)


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


def _plan_writes(session: Any, points: list[lineproto.Point], now: int) -> list[_WritePlan]:
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
                    raise lineproto.LineError(
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


# --- Small routes ---------------------------------------------------------------------------


def stats_route(ctx: Context) -> Response:
    """Per database the caller may read: all of them, or only the one `db=` names."""
    instance = ctx.app.instance
    names = instance.database_names()
    if "db" in ctx.args:
        wanted = [n for n in names if n.casefold() == ctx.database.casefold()]
        if not wanted:
            raise UnknownDatabase(ctx.database)
        instance.access.check(ctx.principal, wanted[0], "READ")
    else:
        wanted = [n for n in names if instance.access.allowed(ctx.principal, n, "READ")]
    stats = instance.stats().get("databases", {})
    return json_response({"databases": {n: stats.get(n, {}) for n in wanted}})


def health_route(ctx: Context) -> Response:
    return json_response({"status": "ok"})


def openapi_route(ctx: Context) -> Response:
    return Response(ctx.app.openapi_bytes, content_type="application/json")


def session_open_route(ctx: Context) -> Response:
    return ctx.app.auth.open_session(ctx.request, ctx.app.read_body(ctx.request))


def session_close_route(ctx: Context) -> Response:
    return ctx.app.auth.close_session(ctx.request)


@dataclass(frozen=True, slots=True)
class Route:
    path: str
    methods: tuple[str, ...]
    handler: Callable[[Context], Response]
    params: frozenset[str]
    public: bool = False  # answered without looking at credentials
    uses_database: bool = True  # db= must name an existing database
    repeatable: frozenset[str] = frozenset()  # parameters that may be given several times


def _route(path: str, methods: str, handler: Callable[[Context], Response], params: str = "",
           **flags: bool) -> Route:  # fmt: skip
    return Route(path, tuple(methods.split()), handler, frozenset(params.split()) | {"db"}, **flags)


ROUTES: tuple[Route, ...] = (
    _route("/exec", "GET POST", exec_route, "query"),
    _route("/exp", "GET", export_route, "query"),
    _route("/imp", "POST", import_route, "table"),
    _route("/write", "POST", write_route, "precision"),
    _route("/api/stats", "GET", stats_route, uses_database=False),
    _route("/api/changes", "GET", changes_route, "table from limit wait format"),
    Route("/api/rev", ("GET",), rev_route, frozenset({"table", "symbol", "column", "db"}),
          repeatable=frozenset({"symbol"})),  # fmt: skip
    _route("/api/subscribe", "GET", subscribe_route, "query wait id"),
    _route("/health", "GET", health_route, public=True, uses_database=False),
    _route("/openapi.json", "GET", openapi_route, public=True, uses_database=False),
    _route("/api/session", "POST", session_open_route, public=True, uses_database=False),
    _route("/api/session", "DELETE", session_close_route, public=True, uses_database=False),
)

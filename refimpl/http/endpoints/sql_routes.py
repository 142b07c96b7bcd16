"""/exec and /exp: SQL in, a JSON answer or CSV rows out.

A write over /exec is answered once durable, by the waiting mechanism rather than the worker
(see `refimpl.waiting.acknowledgements`).
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.engine import copying
from refimpl.engine.session import Session
from refimpl.errors import BadRequest, KdbError
from refimpl.http.auth import by_cookie
from refimpl.http.context import Context
from refimpl.http.encode import Answer, csv_chunks, json_response, result_answer, result_body
from refimpl.http.error_answers import to_response
from refimpl.http.exec_body import sql_of_form_body
from refimpl.http.route_memo import MEMO_KEY, Routed, RouteMemo
from refimpl.sql import ast
from refimpl.waiting.parked import Parked

_SQL_BODIES = ("", "text/plain", "application/sql")  # the content types of SQL as the body
_NO_SQL = "no SQL; send it in the 'query' parameter or as the request body"


def _sql_of(ctx: Context) -> str:
    """The SQL of /exec: the `query` parameter, the body, or the form field `query` (a
    form-encoded body may also be the SQL itself: see `refimpl.http.exec_body`)."""
    from_url = ctx.args.get("query")
    from_body: str | None = None
    if ctx.method == "POST":
        # A bare type is its own mimetype: read without parsing the header's parameters.
        mimetype = ctx.environ.get("CONTENT_TYPE", "")
        if mimetype not in _SQL_BODIES:
            mimetype = ctx.request.mimetype
        if mimetype in _SQL_BODIES:  # first: most clients send the SQL as it is
            from_body = ctx.body_text() or None
        elif mimetype == "application/x-www-form-urlencoded":
            from_body = sql_of_form_body(ctx.body())  # what curl -d sends
        elif mimetype == "multipart/form-data":
            form = ctx.app.read_form(ctx.request)
            unknown = sorted(set(form) - {"query"})
            if unknown:
                raise BadRequest(f"unknown form field(s): {', '.join(unknown)}; send 'query'")
            from_body = form.get("query")
        else:
            raise BadRequest(
                f"content type '{mimetype}' is not taken here; send the SQL as"
                " text/plain, or as the form field 'query'"
            )
    if from_url is not None and from_body is not None:
        raise BadRequest("send the SQL once: in the query parameter or in the body, not both")
    sql = from_url if from_url is not None else from_body
    if sql is None or not sql.strip():
        raise BadRequest(_NO_SQL)
    return sql


def exec_route(ctx: Context) -> Response | Answer | Parked[Answer]:
    args = ctx.args
    if "query" in args:  # COPY comes in the query parameter, never as the body
        copied = _copy(ctx)
        if copied is not None:
            return copied
    elif ctx.method == "POST" and ctx.environ.get("CONTENT_TYPE", "") in _SQL_BODIES:
        # Most clients: the SQL as the body, nothing in the query string. `_sql_of`'s answer
        # for it, without its look at each other way of sending SQL.
        sql = ctx.body_text()
        if not sql.strip():
            raise BadRequest(_NO_SQL)
        return _exec(ctx, sql)
    return _exec(ctx, _sql_of(ctx))


def _exec(ctx: Context, sql: str) -> Answer | Parked[Answer]:
    """The answer of `sql` (/exec's SQL, found in the request): its result, a write's
    parked until durable."""
    if ctx.method == "GET" and by_cookie(ctx.environ):
        # A link or an image on any page makes the browser GET with the cookie: a change
        # must come as a POST, which the origin check sees. A token client keeps GET for all.
        _refuse_changes(
            sql, "with the session cookie, GET /exec runs queries only, not {}; POST it"
        )
    # `ctx.session`'s block written out (closed however it ends): a few calls fewer on the
    # route most requests take.
    session = _session(ctx)
    try:
        answer = result_answer(session.execute(sql, ()), sql)
    except KdbError as error:
        if not session.durable_needed:
            raise
        answer = to_response(error)  # a script's earlier commits: still wait for them
    finally:
        session.close()
    return ctx.when_durable(session, answer)


def _session(ctx: Context) -> Session:
    """The request's engine session (`acknowledge_later`): its connection's last /exec
    request's again (kept in the route memo of the connection's repeats, `route_memo`) when
    that one is what a new one would be: the same principal's in the same database (still
    the one of its name: a database dropped and made again is another), with nothing of an
    earlier request left in it (its close rolled back any transaction; no cursor held past
    a commit). Who asks is checked at every request all the same: their token and their
    rights in the database before the route (`App`), each statement's rights as it runs."""
    memo: RouteMemo[Routed] | None = ctx.environ.get(MEMO_KEY)
    if memo is not None:
        kept = memo.kept
        if (
            type(kept) is Session
            and kept.principal is ctx.principal
            and kept.transaction is None
            and not kept.cursors.open
            and kept.catalog.database(ctx.database) is kept.database
        ):
            kept.durable_needed = 0  # the earlier request's answer waited for its own
            return kept
    session = ctx.app.instance.session(ctx.database, ctx.principal, acknowledge_later=True)
    if memo is not None and memo.route is not None:  # noted: its repeats come here again
        memo.kept = session
    return session


# The content types of COPY rows; a form-encoded body is what `curl --data-binary` sends
# unless told otherwise, and is the rows as they are (never decoded as a form).
_COPY_BODIES = (
    "",
    "text/csv",
    "text/plain",
    "application/octet-stream",
    "application/x-www-form-urlencoded",
)


def _copy(ctx: Context) -> Response | Answer | Parked[Answer] | None:
    """`COPY ... FROM STDIN` in the `query` parameter with its rows as the body, or `COPY ...
    TO STDOUT` answering the rows as text, streamed; None for any other SQL."""
    sql = ctx.args.get("query")
    if sql is None or sql.lstrip()[:4].upper() != "COPY":
        return None
    statement = copying.copy_statement(sql)
    if isinstance(statement, ast.CopyTo):
        with ctx.session() as session:
            output = copying.copy_out(session, sql)
        return Response(output.chunks(), content_type=output.content_type)
    if statement is None:
        return None
    request = ctx.request
    if request.method != "POST":
        raise BadRequest("COPY ... FROM STDIN takes its rows as the body of a POST")
    if request.mimetype not in _COPY_BODIES:
        raise BadRequest(
            f"content type '{request.mimetype}' is not taken for COPY rows; send text/csv"
            " or text/plain"
        )
    with ctx.session(acknowledge_later=True) as session:
        answer = json_response(result_body(copying.copy_in(session, sql, request.stream), sql))
    return ctx.when_durable(session, answer)


def export_route(ctx: Context) -> Response:
    sql = ctx.require("query")
    _refuse_changes(sql, "/exp runs queries only, not {}; use /exec for it")
    with ctx.session() as session:
        result = session.execute(sql, ())
    if result.columns is None:
        raise BadRequest("/exp exports the rows of a query; run other statements with /exec")
    return Response(csv_chunks(result), content_type="text/csv; charset=utf-8")


def _refuse_changes(sql: str, refusal: str) -> None:
    """Refuse, before anything runs, a script holding a statement that is not a query;
    `refusal` is the error, `{}` the statement's kind."""
    from refimpl.sql import ast
    from refimpl.sql.parser import parse

    readers: tuple[type[ast.Statement], ...] = (ast.Select, ast.ShowTables, ast.ShowColumns)
    readers += (ast.ShowCreateTable, ast.ShowUsers, ast.ShowGrants)
    script = parse(sql)
    for statement in script.statements:
        if not isinstance(statement, readers):
            raise BadRequest(refusal.format(type(statement).__name__))

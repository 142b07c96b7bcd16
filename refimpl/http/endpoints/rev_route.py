"""GET /api/rev: a table's revision and those of values of its rev column.

It reads in-memory revisions only: no database lock, no table scan, so it answers at once
even while a long transaction or a bulk import holds the database.
"""

from __future__ import annotations

from werkzeug.wrappers import Response

from refimpl.errors import BadRequest, NotFound
from refimpl.http.context import Context
from refimpl.http.encode import json_response


def rev_route(ctx: Context) -> Response:
    table_name = ctx.require("table")
    database = ctx.app.instance.database(ctx.database)
    # A plain dict read: atomic, and never behind a reader that holds the state lock.
    table = database.tables.get(table_name.lower())
    if table is None:
        raise NotFound(f"table '{table_name}' does not exist in database '{database.name}'")
    schema = table.schema
    ctx.app.instance.access.check(ctx.principal, database.name, "READ", schema.name)
    rev_column = schema.rev_column
    asked_column = ctx.args.get("column")
    if asked_column is not None:
        if rev_column is None:
            raise BadRequest(
                f"table '{schema.name}' keeps no revisions per value (it has no rev column);"
                " ask without 'column' for its table_rev"
            )
        if asked_column.lower() != rev_column.lower():
            raise BadRequest(
                f"table '{schema.name}' keeps revisions per value of column '{rev_column}',"
                f" not '{asked_column}'"
            )
    symbols = ctx.request.args.getlist("symbol")
    revisions = database.revisions
    return json_response(
        {
            "database": database.name,
            "table": schema.name,
            "column": rev_column,
            "boot": revisions.boot,
            "table_rev": revisions.table_rev(schema.name),
            "revs": revisions.value_revs(schema.name, symbols),
        },
        headers={"Cache-Control": "no-store"},
    )

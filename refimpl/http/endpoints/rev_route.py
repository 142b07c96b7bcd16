"""GET /api/rev: a table's revision and those of values of its rev column.

It reads in-memory revisions only: no database lock, no table scan, so it answers at once
even while a long transaction or a bulk import holds the database.
"""

from __future__ import annotations

from refimpl.http.context import Context
from refimpl.http.encode import Answer, json_response
from refimpl.http.request_input import query_values


def rev_route(ctx: Context) -> Answer:
    answer = ctx.app.feeds.revisions(
        ctx.database,
        ctx.require("table"),
        ctx.principal,
        ctx.args.get("column"),
        # Without Werkzeug's request: a fifth of this route's Python on a woken thread,
        # which an import running meanwhile makes wait at its switch interval.
        query_values(ctx.environ, "symbol"),
    )
    return json_response(
        {
            "database": answer.database,
            "table": answer.table,
            "column": answer.column,
            "boot": answer.boot,
            "table_rev": answer.table_rev,
            "revs": answer.revs,
        },
        headers={"Cache-Control": "no-store"},
    )

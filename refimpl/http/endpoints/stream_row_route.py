"""GET /stream/row: a row's current state by the key an event carries (the event's `href`).

Answers `{"table", "key", "row"}`, the row as an object of its columns; 404 once the row is
gone (deleted, or moved to another key). Needs READ on the table.
"""

from __future__ import annotations

from urllib.parse import quote

from refimpl.engine.features.event_cursor import Links
from refimpl.engine.storage import values
from refimpl.http.context import Context
from refimpl.http.encode import Answer, json_response

HEADERS = {"Cache-Control": "no-store"}
ROW_PATH = "/stream/row"


def row_link(database: str, table: str) -> str:
    """The `href` of a table's rows on this route, but for the key (an event's `href`)."""
    return f"{ROW_PATH}?db={quote(database)}&table={quote(table)}&key="


# What the event streams' answers point to: this route, the tickets' and the stream's.
STREAM_LINKS = Links(row=row_link, tickets="POST /stream/tickets", stream="/stream/changes")


def stream_row_route(ctx: Context) -> Answer:
    found = ctx.app.streams.read_row(
        ctx.principal, ctx.database, ctx.require("table"), ctx.require("key").strip()
    )
    row = {c.name: values.to_json(v, c.type) for c, v in zip(found.columns, found.row, strict=True)}
    return json_response({"table": found.table, "key": found.key, "row": row}, 200, HEADERS)

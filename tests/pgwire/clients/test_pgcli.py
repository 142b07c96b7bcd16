"""pgcli against a real server's PostgreSQL port, driven in-process as its prompt drives it:
its completion refresher loads the catalog at start (search path, schemata, tables, views,
columns, functions, types, databases: the queries kept in captured/pgcli.sql), its
completer then offers the database's table names after FROM and a table's column names in
the select list, and its executor runs a query."""

from __future__ import annotations

import threading
from typing import Any

from pgcli.completion_refresher import CompletionRefresher
from pgcli.pgexecute import PGExecute
from pgspecial.main import PGSpecial
from prompt_toolkit.document import Document

from tests.pgwire.clients.capture import normalised, record, relay
from tests.pgwire.conftest import PgServer


def completions(completer: Any, text: str, at: int | None = None) -> list[str]:
    document = Document(text, cursor_position=len(text) if at is None else at)
    return [c.text for c in completer.get_completions(document, None)]


def test_pgcli_loads_the_catalog_completes_names_and_runs_a_query(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE quotes (sym STRING PRIMARY KEY, px DOUBLE, at TIMESTAMP)", db)
    pg.http.sql("CREATE VIEW dear AS SELECT sym, px FROM quotes WHERE px > 100", db)
    pg.http.sql("INSERT INTO quotes VALUES ('a', 1.5, '2026-01-02T03:04:05Z')", db)
    with relay(pg.host, pg.port) as captured:
        executor = PGExecute(
            database=db, user="admin", password=pg.token, host=pg.host, port=captured.port
        )
        loaded: list[Any] = []
        done = threading.Event()

        def ready(completer: Any) -> None:
            loaded.append(completer)
            done.set()

        # What pgcli does at start: a background refresh, its completer handed over at the end
        # (a refresher whose query fails ends the refresh, and no completion is offered).
        CompletionRefresher().refresh(executor, PGSpecial(), ready, history=None, settings={})
        assert done.wait(60), "pgcli's completion refresh did not finish"
        completer = loaded[0]
        assert "quotes" in completions(completer, "SELECT * FROM q")
        assert "dear" in completions(completer, "SELECT * FROM d")
        select_list = completions(completer, "SELECT  FROM quotes", at=len("SELECT "))
        assert {"sym", "px", "at"} <= set(select_list)
        assert "sym" in completions(completer, "SELECT s FROM quotes", at=len("SELECT s"))
        # The type a completion's description shows: `atttypid::regtype::text`, the name. Its
        # query names no schema: the catalog's own tables come too, as from PostgreSQL.
        columns = list(executor.table_columns())
        types = {row[2]: row[3] for row in columns if row[0] == "public"}
        assert types == {"sym": "text", "px": "double precision", "at": "timestamp with time zone"}
        assert ("pg_catalog", "pg_class", "relname") in {row[:3] for row in columns}
        ran = list(executor.run("SELECT sym, px FROM quotes ORDER BY sym"))
        _, cursor, headers, status, *_ = ran[0]
        assert headers == ["sym", "px"] and list(cursor) == [("a", 1.5)]
        assert status == "SELECT 1"
        executor.conn.close()
    record("pgcli", normalised(captured.statements, {db: "DB", pg.token: "TOKEN"}))

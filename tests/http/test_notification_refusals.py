"""LISTEN, UNLISTEN and NOTIFY over `/exec`: a request answers once, so they are refused with
a pointer to where notifications and a table's changes are served; the engine's error names
no route (spec: pgwire, Notifications)."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import NeedsNotifications
from tests.http.conftest import Server

POINTER = (
    "needs a session that can be sent notifications; run it over the PostgreSQL protocol,"
    " or follow a table over HTTP with changes('t') or GET /api/changes"
)


@pytest.mark.parametrize(
    ("sql", "statement"),
    [("LISTEN c", "LISTEN"), ("UNLISTEN *", "UNLISTEN"), ("NOTIFY c, 'x'", "NOTIFY")],
)
def test_exec_refuses_with_a_pointer_and_changes_nothing(
    server: Server, db: str, sql: str, statement: str
) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    response = server.exec(f"BEGIN; INSERT INTO t VALUES (1); {sql}", db)
    assert response.status_code == 400
    assert response.json()["error"] == f"{statement} {POINTER}"
    assert response.json()["statement"] == 3
    # the open transaction is rolled back with the refused statement
    assert server.sql("SELECT count(*) FROM t", db)["dataset"] == [[0]]


def test_the_engine_names_no_route(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data", EngineOptions())
    try:
        session = instance.session("demo", ADMIN)
        with pytest.raises(NeedsNotifications) as refused:
            session.execute("LISTEN c")
        assert refused.value.instead is None
        assert str(refused.value) == "LISTEN needs a session that can be sent notifications"
        session.close()
    finally:
        instance.close()

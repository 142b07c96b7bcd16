"""SUBSCRIBE's refusals: the engine raises typed errors that name no route, and the HTTP
layer words them as the spec gives them (spec: subscribe, SUBSCRIBE in /exec)."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import AnswersMoreThanOnce, NotASubscription
from tests.http.conftest import Server

EXEC_REFUSAL = (
    "SUBSCRIBE answers more than once, so /exec cannot run it;"
    " use GET /api/subscribe?query=SUBSCRIBE SELECT ..."
)


def test_exec_refuses_subscribe_with_the_spec_sentence(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    response = server.exec("INSERT INTO t VALUES (1); SUBSCRIBE SELECT id FROM t", db)
    assert response.status_code == 400
    assert response.json()["error"] == EXEC_REFUSAL
    assert response.json()["statement"] == 2


def test_a_subscription_that_is_no_subscribe_is_a_400_naming_the_route(
    server: Server, db: str
) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    response = server.get("/api/subscribe", params={"db": db, "query": "SELECT id FROM t"})
    assert response.status_code == 400
    assert response.json()["error"] == (
        "the query of /api/subscribe must start with SUBSCRIBE SELECT"
    )


def test_the_engine_names_no_route(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data", EngineOptions())
    try:
        session = instance.session("demo", ADMIN)
        session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        with pytest.raises(AnswersMoreThanOnce) as refused:
            session.execute("SUBSCRIBE SELECT id FROM t")
        assert refused.value.served_at is None
        assert "/api/" not in str(refused.value) and "/exec" not in str(refused.value)
        session.close()
    finally:
        instance.close()
    assert "/api/" not in str(NotASubscription())

"""SUBSCRIBE's refusals: the engine raises typed errors that name no route, and the HTTP
layer words them as the spec gives them (spec: subscribe, SUBSCRIBE in /exec)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from werkzeug.test import EnvironBuilder

from refimpl.engine.access import ADMIN
from refimpl.engine.features.live_queries import LiveWait
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import AnswersMoreThanOnce, Forbidden, NotASubscription
from refimpl.http.app import App, AppOptions
from refimpl.waiting.places import place_owner
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


def test_a_wait_whose_first_attempt_fails_leaves_no_place_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A REVOKE or the statement timeout in the attempt a waiting request makes once it
    watches (before it is parked) is its answer: its wait place goes back and its query is
    off the wake board (both stayed taken before)."""
    instance = Instance.open(tmp_path / "data", EngineOptions())
    app = App(instance, AppOptions(dev=True))
    try:
        session = instance.session("demo", ADMIN)
        session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        session.close()
        query = "SUBSCRIBE SELECT id FROM t"
        statuses: list[str] = []

        def ask(**params: str) -> bytes:
            environ = EnvironBuilder(
                path="/api/subscribe", query_string={"query": query, **params}
            ).get_environ()

            def start(status: str, *_: object) -> Callable[[bytes], None]:
                statuses.append(status)
                return lambda _data: None

            return b"".join(app(environ, start))

        first = ask(wait="0")
        ident = next(line for line in first.split(b"\n") if line.startswith(b"id: "))[4:]

        def refused(self: LiveWait, *_: object) -> None:
            raise Forbidden("the right to read 't' was revoked")

        monkeypatch.setattr(LiveWait, "attempt", refused)
        ask(id=ident.decode(), wait="5000")
        assert statuses[-1].startswith("403")
        places = app.waiting_room.wait_places(app.wait_slots)
        assert places.held(place_owner(ADMIN.name, ADMIN.is_admin)) == 0
        assert instance.subscriptions.stats()["waiting"] == 0
    finally:
        app.begin_shutdown()
        instance.close()

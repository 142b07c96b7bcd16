"""A long poll's re-poll of the version its connection's last poll answered waits on the
wait kept on the wake board since that answer (`subscribe_route._Poll.rearm`): no new wait,
no new registration. It still sees every commit after that version, its right to read is
checked again, and its wait's deadline holds; a wait no re-poll takes ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.http.app import App, AppOptions
from refimpl.http.endpoints.subscribe_route import _Kept, _Poll
from refimpl.http.route_memo import MEMO_KEY, RouteMemo
from refimpl.waiting.places import ADMIN_OWNER

QUERY = "SUBSCRIBE SELECT id FROM t"


@pytest.fixture(params=[True])
def app(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[App]:
    """The app (`dev`: every request the admin's, by default; else by token)."""
    instance = Instance.open(tmp_path / "data", EngineOptions())
    served = App(instance, AppOptions(dev=request.param))
    session = instance.session("demo", ADMIN)
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    session.close()
    try:
        yield served
    finally:
        served.begin_shutdown()
        instance.close()


class _Connection:
    """The requests of one keep-alive connection: its repeats share one `RouteMemo`."""

    def __init__(self, app: App, token: str | None = None) -> None:
        self.app = app
        self.memo: RouteMemo[Any] = RouteMemo()
        self.headers = [("Host", "localhost")]
        if token is not None:
            self.headers.append(("Authorization", f"Bearer {token}"))

    def ask(self, **params: str) -> tuple[str, bytes]:
        environ = EnvironBuilder(
            path="/api/subscribe",
            query_string={"query": QUERY, **params},
            headers=self.headers,
        ).get_environ()
        environ[MEMO_KEY] = self.memo
        statuses: list[str] = []

        def start(status: str, *_: object) -> Callable[[bytes], None]:
            statuses.append(status)
            return lambda _data: None

        body = b"".join(self.app(environ, start))
        return statuses[-1], body

    def asked(self, **params: str) -> Callable[[], tuple[str, bytes]]:
        """`ask` on a thread of its own (a parked poll answers when a commit comes): its
        answer, once it came."""
        answers: list[tuple[str, bytes]] = []
        thread = threading.Thread(target=lambda: answers.append(self.ask(**params)))
        thread.start()

        def answer() -> tuple[str, bytes]:
            thread.join(60)
            return answers[0]

        return answer

    @property
    def poll(self) -> _Poll:
        kept = self.memo.kept
        assert isinstance(kept, _Kept) and kept.poll is not None
        return kept.poll


def _id(body: bytes) -> str:
    return next(line for line in body.split(b"\n") if line.startswith(b"id: "))[4:].decode()


def _parked(app: App, connection: _Connection, poll: _Poll | None = None) -> _Poll:
    """The connection's poll once it is parked (`poll`: while the last one is still kept)."""
    for _ in range(6000):
        kept = connection.memo.kept
        if isinstance(kept, _Kept) and kept.poll is not None and kept.poll is not poll:
            with kept.poll._lock:
                if kept.poll._parked is not None:
                    return kept.poll
        threading.Event().wait(0.01)
    raise AssertionError("the poll was never parked")


def _insert(app: App, value: int) -> None:
    session = app.instance.session("demo", ADMIN)
    try:
        session.execute(f"INSERT INTO t VALUES ({value})")
    finally:
        session.close()


def _waiting(app: App) -> int:
    return app.instance.subscriptions.stats()["waiting"]


def _answered_rows(app: App, connection: _Connection, wait: str = "60000") -> tuple[_Poll, str]:
    """A snapshot, then a parked poll answered with rows by a commit: that poll and its id
    (its repeats must ask with the same `wait`: only the id differs in a repeat)."""
    snapshot = _id(connection.ask(wait="0")[1])
    answer = connection.asked(id=snapshot, wait=wait)
    poll = _parked(app, connection)
    _insert(app, 1)
    status, body = answer()
    assert status.startswith("200") and b"event: rows" in body, body
    return poll, _id(body)


def test_a_repoll_of_the_answered_version_waits_on_the_kept_wait(app: App) -> None:
    connection = _Connection(app)
    first, answered = _answered_rows(app, connection)
    step = first.step
    assert step.waker is first and _waiting(app) == 1  # kept on the wake board
    answer = connection.asked(id=answered, wait="60000")
    again = _parked(app, connection, None)
    assert again is first and again.step is step  # no new wait, no new registration
    _insert(app, 2)
    status, body = answer()
    assert status.startswith("200") and b"event: rows" in body and b"[[2]]" in body, body
    assert _id(body) != answered


def test_a_commit_between_the_answer_and_the_repoll_is_answered_at_once(app: App) -> None:
    connection = _Connection(app)
    first, answered = _answered_rows(app, connection)
    _insert(app, 2)  # before the re-poll: the kept wait ends, and the re-poll reads again
    assert first.step.waker is None and _waiting(app) == 0
    status, body = connection.ask(id=answered, wait="60000")
    assert status.startswith("200") and b"event: rows" in body and b"[[2]]" in body, body


@pytest.mark.parametrize("app", [False], indirect=True)
def test_a_right_revoked_between_polls_is_a_403_and_ends_the_kept_wait(app: App) -> None:
    session = app.instance.session("demo", ADMIN)
    session.execute("CREATE USER poll_u")
    session.execute("GRANT SELECT ON t TO poll_u")
    token = session.execute("CREATE TOKEN FOR poll_u").rows[0][0]
    connection = _Connection(app, token)
    try:
        first, answered = _answered_rows(app, connection)
        assert first.step.waker is first
        session.execute("REVOKE SELECT ON t FROM poll_u")
        status, body = connection.ask(id=answered, wait="60000")
        assert status.startswith("403"), (status, body)
        assert b"poll_u" in body, body
        # Not parked; the wait kept since the answer ends at the next commit it sees (or
        # with the connection), answering nothing.
        _insert(app, 2)
        assert first.step.waker is None and _waiting(app) == 0
    finally:
        session.close()


def test_the_repolls_wait_ends_at_its_deadline(app: App) -> None:
    connection = _Connection(app)
    first, answered = _answered_rows(app, connection, wait="2000")
    status, body = connection.ask(id=answered, wait="2000")
    assert status.startswith("200") and b"event:" not in body, body  # `none`: its id alone
    assert _id(body) == answered and connection.poll is first
    assert first.step.waker is None and _waiting(app) == 0


def test_a_kept_wait_no_repoll_takes_ends_with_the_connection(app: App) -> None:
    connection = _Connection(app)
    first, _ = _answered_rows(app, connection)
    assert _waiting(app) == 1
    connection.memo.forget()  # the connection closed (`HttpConnection.close`)
    assert first.step.waker is None and _waiting(app) == 0


def _held(app: App, owner: object = ADMIN_OWNER) -> int:
    """The wait places `owner` holds (the admin's: every request of a `dev` app)."""
    return app.waiting_room.wait_places(app.wait_slots).held(owner)


def test_the_kept_wait_keeps_its_place_for_the_repoll(app: App) -> None:
    connection = _Connection(app)
    first, answered = _answered_rows(app, connection)
    assert _held(app) == 1  # kept with the wait, for the re-poll
    answer = connection.asked(id=answered, wait="60000")
    assert _parked(app, connection, None) is first
    assert _held(app) == 1  # the re-poll took the kept place, none of its own
    _insert(app, 2)
    assert b"[[2]]" in answer()[1]
    assert _held(app) == 1
    connection.memo.forget()  # the connection closed: the wait ends, its place goes back
    assert _held(app) == 0 and _waiting(app) == 0


def test_a_kept_place_goes_back_when_the_kept_wait_ends(app: App) -> None:
    connection = _Connection(app)
    _, answered = _answered_rows(app, connection)
    _insert(app, 2)  # the kept wait ends at this commit, and its place with it
    assert _held(app) == 0
    status, body = connection.ask(id=answered, wait="60000")
    assert b"[[2]]" in body and _held(app) == 0  # answered at once: it never waited


def test_a_repoll_answered_at_its_deadline_gives_the_place_back(app: App) -> None:
    connection = _Connection(app)
    _, answered = _answered_rows(app, connection, wait="500")
    status, body = connection.ask(id=answered, wait="500")
    assert b"event:" not in body and _held(app) == 0


@pytest.mark.parametrize("app", [False], indirect=True)
def test_a_kept_place_goes_back_with_the_wait_after_a_revoke(app: App) -> None:
    session = app.instance.session("demo", ADMIN)
    session.execute("CREATE USER place_u")
    session.execute("GRANT SELECT ON t TO place_u")
    token = session.execute("CREATE TOKEN FOR place_u").rows[0][0]
    connection = _Connection(app, token)
    try:
        _, answered = _answered_rows(app, connection)
        assert _held(app, "place_u") == 1
        session.execute("REVOKE SELECT ON t FROM place_u")
        status, _ = connection.ask(id=answered, wait="60000")
        assert status.startswith("403")
        # The place goes with the kept wait: at the next commit it sees (or with the
        # connection), as the wait does.
        _insert(app, 2)
        assert _held(app, "place_u") == 0 and _waiting(app) == 0
    finally:
        session.close()

"""GET /api/subscribe?stream=true on a real server: one long-lived answer with the events the
long polls would give (snapshot, then a `rows` event per change, each with its id), resumed
by its last id, ended when its token or right goes or a long poll takes its subscription
over, or at its max age; heartbeats as comments; a costly re-run is its user's work."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from refimpl.http.endpoints.subscribe_stream import FirstRunEnters
from tests.http.conftest import ADMIN, Server, running_server
from tests.http.stream_client import EventReader, sse_events

HEARTBEAT = 0.3
MAX_AGE = 4.0
TIMEOUT_MS = 500
CANDLES = (
    "SUBSCRIBE SELECT s, count(*) AS n, sum(v) AS total FROM t WHERE s = 'a' GROUP BY s ORDER BY s"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("live_streams") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(
        f"stream_heartbeat_s = {HEARTBEAT}\nstream_max_age_s = {MAX_AGE}\n"
        f"statement_timeout_ms = {TIMEOUT_MS}\n"
    )
    with running_server(data) as running:
        yield running


@pytest.fixture
def db(server: Server) -> str:
    name = "l_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE DATABASE {name}")
    server.sql(
        "CREATE TABLE t (ts TIMESTAMP, s SYMBOL, v DOUBLE)"
        " TIMESERIES(ts) PARTITION BY DAY, SYMBOL(s)",
        name,
    )
    server.sql("INSERT INTO t VALUES (now(), 'a', 1), (now(), 'b', 100)", name)
    return name


def open_live(
    server: Server,
    db: str,
    *,
    token: Any = ADMIN,
    query: str = CANDLES,
    headers: dict[str, str] | None = None,
    **params: Any,
) -> EventReader:
    response = server.get(
        "/api/subscribe",
        params={"query": query, "db": db, "stream": "true", **params},
        headers=headers or {},
        stream=True,
        timeout=(10, 10),
        token=token,
    )
    return EventReader(response)


def long_poll(server: Server, db: str, ident: str, token: Any = ADMIN) -> tuple:
    response = server.get(
        "/api/subscribe", params={"query": CANDLES, "db": db, "id": ident, "wait": 0}, token=token
    )
    assert response.status_code == 200, response.text
    (event,) = sse_events(response.text)
    return event


def test_a_snapshot_then_a_rows_event_per_change_on_one_connection(server: Server, db: str):
    stream = open_live(server, db)
    assert stream.status == 200
    assert stream.response.headers["Content-Type"].startswith("text/event-stream")
    assert "Content-Length" not in stream.response.headers
    (snapshot,) = stream.take(1)
    assert snapshot["retry"] == 1000 and snapshot["event"] == "snapshot"
    assert snapshot["data"]["rows"] == [["a", 1, 1.0]]
    name, version = snapshot["id"].rsplit(".", 1)
    assert version == "1"
    server.sql("INSERT INTO t VALUES (now(), 'b', 5)", db)  # another symbol: no event
    server.sql("INSERT INTO t VALUES (now(), 'a', 2)", db)
    (first,) = stream.take(1)
    assert (first["event"], first["data"]["rows"]) == ("rows", [["a", 2, 3.0]])
    assert first["id"] == f"{name}.2"
    server.sql("INSERT INTO t VALUES (now(), 'a', 3)", db)
    (second,) = stream.take(1)
    assert (second["id"], second["data"]["rows"]) == (f"{name}.3", [["a", 3, 6.0]])
    assert "retry" not in first and "retry" not in second
    stream.close()
    # The ids are those of the long polls: nothing changed since the last one.
    assert long_poll(server, db, second["id"]) == (second["id"], None, None)


def test_reconnecting_with_the_last_id_sends_what_changed_meanwhile(server: Server, db: str):
    stream = open_live(server, db)
    (snapshot,) = stream.take(1)
    stream.close()
    server.sql("INSERT INTO t VALUES (now(), 'a', 4)", db)
    again = open_live(server, db, headers={"Last-Event-ID": snapshot["id"]})
    assert again.status == 200, again.response.text
    (missed,) = again.take(1)
    assert missed["event"] == "rows" and missed["data"]["rows"] == [["a", 2, 5.0]]
    assert missed["id"].rsplit(".", 1)[0] == snapshot["id"].rsplit(".", 1)[0]
    again.close()


def test_heartbeats_are_comments(server: Server, db: str):
    stream = open_live(server, db)
    stream.take(1)
    time.sleep(HEARTBEAT * 4)
    server.sql("INSERT INTO t VALUES (now(), 'a', 2)", db)
    (rows,) = stream.take(1)
    assert rows["event"] == "rows"
    assert stream.comments.count("heartbeat") >= 2
    stream.close()


def test_a_long_poll_of_the_subscription_takes_it_over(server: Server, db: str):
    stream = open_live(server, db)
    (snapshot,) = stream.take(1)
    assert long_poll(server, db, snapshot["id"]) == (snapshot["id"], None, None)
    assert stream.until_end(5) == []
    assert any("took over" in c for c in stream.comments), stream.comments


def _user(server: Server, db: str) -> tuple[str, str]:
    user = "u_" + uuid.uuid4().hex[:8]
    server.sql(f"CREATE USER {user}", db)
    server.sql(f"GRANT SELECT ON t TO {user}", db)
    return user, server.new_token(user, db)


@pytest.mark.parametrize("how", ["revoke", "drop_token", "drop_user"])
def test_losing_the_right_or_the_token_ends_the_stream(server: Server, db: str, how: str):
    user, token = _user(server, db)
    stream = open_live(server, db, token=token)
    stream.take(1)
    if how == "revoke":
        server.sql(f"REVOKE SELECT ON t FROM {user}", db)
    elif how == "drop_token":
        server.sql(f"DROP TOKEN '{token}'", db)
    else:
        server.sql(f"DROP USER {user}", db)
    server.sql("INSERT INTO t VALUES (now(), 'a', 9)", db)  # never reaches the stream
    assert stream.until_end(5) == []
    assert any(c.startswith("the stream ended: ") for c in stream.comments), stream.comments
    again = open_live(server, db, token=token)
    assert again.status in (401, 403)
    again.close()


def test_without_a_token_or_with_a_bad_query_nothing_opens(server: Server, db: str):
    server.sql("GRANT SELECT ON t TO PUBLIC", db)
    anonymous = open_live(server, db, token=None)
    assert anonymous.status == 401
    assert "token" in anonymous.response.json()["error"]
    bad = open_live(server, db, query="SUBSCRIBE SELECT nope FROM t")
    assert bad.status == 400 and "nope" in bad.response.json()["error"]
    wrong = open_live(server, db, stream="maybe")
    assert wrong.status == 400 and "stream" in wrong.response.json()["error"]


def test_a_slow_reader_gets_the_changes_together(server: Server, db: str):
    """A part is made once the one before is sent: commits meanwhile come as one difference,
    which applied to what the client had gives the answer a fresh run gives."""
    stream = open_live(server, db)
    stream.take(1)
    for price in range(2, 40):
        server.sql(f"INSERT INTO t VALUES (now(), 'a', {price})", db)
    last: dict = {}
    while not last.get("data") or last["data"]["rows"][-1][1] < 39:
        (last,) = stream.take(1)
    fresh = server.rows("SELECT s, count(*), sum(v) FROM t WHERE s = 'a' GROUP BY s", db)
    assert last["data"]["rows"] == fresh
    assert json.loads(json.dumps(last["data"]))["removed"] == 0
    stream.close()


def test_a_stream_ends_at_its_max_age_and_resumes(server: Server, db: str):
    stream = open_live(server, db)
    (snapshot,) = stream.take(1)
    started = time.monotonic()
    assert stream.until_end(MAX_AGE + 3) == []
    assert time.monotonic() - started >= MAX_AGE - 1.0
    assert any("most age" in c for c in stream.comments), stream.comments
    again = open_live(server, db, headers={"Last-Event-ID": snapshot["id"]})
    (head,) = again.take(1)
    assert head == {"retry": 1000, "id": snapshot["id"]}  # nothing changed: only its id
    again.close()


def test_a_costly_stream_ends_at_the_timeout_and_holds_no_other_stream(server: Server, db: str):
    """A re-run over the statement timeout (a LIKE of an 8 KB pattern over 300 KB texts)
    runs on its user's share of the pool: its stream ends saying why, while another user's
    stream gets each change at once."""
    server.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)", db)
    user, token = _user(server, db)
    server.sql(f"GRANT SELECT ON docs TO {user}", db)
    pattern = "%" + "a_" * 4000 + "%"
    costly = f"SUBSCRIBE SELECT id FROM docs WHERE body LIKE '{pattern}' ORDER BY id LIMIT 5"
    attacker = open_live(server, db, token=token, query=costly)
    assert attacker.take(1)[0]["event"] == "snapshot"
    victim = open_live(server, db)
    victim.take(1)
    text = ("a" * 6998 + "bb") * 43
    server.sql(f"INSERT INTO docs VALUES (1, '{text}'), (2, '{text}')", db)
    for n in range(2, 5):
        started = time.monotonic()
        server.sql(f"INSERT INTO t VALUES (now(), 'a', {n})", db)
        (rows,) = victim.take(1)
        assert rows["data"]["rows"][0][1] == n
        assert time.monotonic() - started < 3.0
    assert attacker.until_end(10) == []
    assert any("statement_timeout_ms" in c for c in attacker.comments), attacker.comments
    victim.close()
    assert server.rows("SELECT count(*) AS n FROM docs", db) == [[2]]


def test_a_closed_stream_gives_its_wait_place_back(server: Server, db: str):
    """More streams than the server's wait places, one after another, each closed by its
    client: each still gets its changes (a stream without a place would end after its first
    event)."""
    places = 16 // 4  # a quarter of the server's threads (16 by default) wait at once
    for n in range(places + 3):
        stream = open_live(server, db)
        stream.take(1)
        server.sql(f"INSERT INTO t VALUES (now(), 'a', {n})", db)
        (rows,) = stream.take(1)
        assert rows["event"] == "rows"
        stream.close()
        time.sleep(0.2)  # the server sees the hang-up


def test_streams_of_one_user_woken_by_one_commit_each_get_the_change(server: Server, db: str):
    """One commit wakes several streams of the same user and query: each gets the same rows
    under its own subscription's id, and the next commit's too (as many streams as the
    server has wait places: a quarter of its 16 threads, less the one a test may hold)."""
    streams = [open_live(server, db) for _ in range(3)]
    firsts = [stream.take(1)[0] for stream in streams]
    names = {event["id"].rsplit(".", 1)[0] for event in firsts}
    assert len(names) == len(streams)
    for n in (2, 3):
        server.sql(f"INSERT INTO t VALUES (now(), 'a', {n})", db)
        events = [stream.take(1)[0] for stream in streams]
        assert all(event["event"] == "rows" for event in events), events
        assert all(event["data"] == events[0]["data"] for event in events), events
        assert events[0]["data"]["rows"] == [["a", n, float(sum(range(1, n + 1)))]]
        assert {event["id"].rsplit(".", 1)[0] for event in events} == names
    for stream in streams:
        stream.close()


def test_streams_woken_together_at_different_versions_each_get_their_own_id(
    server: Server, db: str
):
    """Streams of one user and query, one of them a commit ahead of the others (opened
    before it): one commit wakes them all, and each gets the same rows under its own
    subscription's id and its own next version, never another's number."""
    ahead = open_live(server, db)
    assert ahead.take(1)[0]["event"] == "snapshot"
    server.sql("INSERT INTO t VALUES (now(), 'a', 2)", db)
    assert ahead.take(1)[0]["id"].endswith(".2")
    behind = [open_live(server, db) for _ in range(2)]
    names = {ahead: "", **{stream: "" for stream in behind}}
    for stream in behind:
        (first,) = stream.take(1)
        assert first["event"] == "snapshot" and first["id"].endswith(".1")
        names[stream] = first["id"].rsplit(".", 1)[0]
    for n in (3, 4):
        server.sql(f"INSERT INTO t VALUES (now(), 'a', {n})", db)
        for stream in (ahead, *behind):
            (event,) = stream.take(1)
            assert event["event"] == "rows"
            assert event["data"]["rows"] == [["a", n, float(sum(range(1, n + 1)))]]
            name, _, version = event["id"].rpartition(".")
            if stream is ahead:
                assert int(version) == n
            else:
                assert (name, int(version)) == (names[stream], n - 1)
    for stream in (ahead, *behind):
        stream.close()


def test_a_parts_query_runs_share_one_statement_budget() -> None:
    """A part that runs its query twice (a re-run, then a snapshot) runs both within one
    budget, entered at the first run and left when the part is made: the statement timeout
    is the part's, never one per run; a part that runs no query enters none."""
    events: list[str] = []

    @contextmanager
    def budget() -> Iterator[None]:
        events.append("enter")
        try:
            yield
        finally:
            events.append("leave")

    with FirstRunEnters(budget) as runs:
        with runs():
            events.append("re-run")
        with runs():
            events.append("snapshot")
        assert events == ["enter", "re-run", "snapshot"]
    assert events == ["enter", "re-run", "snapshot", "leave"]

    events.clear()
    with FirstRunEnters(budget):
        pass
    assert events == []

    # A part's failure leaves the budget it entered, as its own error; the next part of
    # the same stream enters it again.
    runs = FirstRunEnters(budget)
    with pytest.raises(KeyError), runs, runs():
        raise KeyError("a bug")
    assert events == ["enter", "leave"]
    with runs:
        with runs():
            pass
    assert events == ["enter", "leave", "enter", "leave"]

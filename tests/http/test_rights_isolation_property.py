"""A property: what a user's readers return never goes beyond that user's rights
(spec: users-and-rights, stream, changes, subscribe), across GRANTs and REVOKEs made while
they are open.

A real server; per example a database with three tables and a marker table, a second
database with a table of the same name, and two users whose READ on the database and
SELECT on each table Hypothesis grants and revokes between inserts. Each user keeps an event
stream (`GET /stream/changes`) open all along; long polls (`/api/changes?wait=`,
`/api/subscribe?id=&wait=`) wait across the next steps; `SELECT`, `changes()` and the
snapshot of `/api/subscribe` read at once. Every inserted row carries a marker naming it, so
whatever any reader answers is searched for markers, and each must name a row of a table
of this database that the user could read:

- a stream's row: at its commit, or (the documented boundary, "from the next commit on")
  under a change of rights made before the next insert;
- an answer's row: at some moment between its request and its answer;
- an immediate read is answered 200 exactly when the model says the user may read, else a
  403 naming READ.

No answer ever carries a token. A stream whose user holds no right left in the database
ends within a few seconds, and the others deliver every readable row (the final marker).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.http.conftest import Server, running_server
from tests.http.stream_client import EventReader, open_stream

USERS = (0, 1)
TABLES = ("t0", "t1", "t2")
MARKER = re.compile(r"mk(\d+)x")
WAIT_MS = 1500  # a long poll's wait: it spans the next few steps
STREAM_END_S = 8.0  # "within a second" of a lost right, with room for a loaded machine


@dataclass(frozen=True)
class Rights:
    """One user's rights in the example's database: READ, and each table's SELECT entry
    (None, 'granted' or 'revoked', as `SHOW GRANTS` has them)."""

    read: bool
    tables: tuple[str | None, ...]

    def may_read(self, table: str) -> bool:
        entry = self.tables[TABLES.index(table)]
        return entry == "granted" or (self.read and entry != "revoked")

    def any_right(self) -> bool:
        return self.read or "granted" in self.tables


@dataclass
class Row:
    """An inserted row: where it went and at which step."""

    db: str
    table: str
    step: int


@dataclass
class Answer:
    """A waiting request's answer, with the step span it was open over."""

    user: int
    table: str
    start: int
    end: int = -1
    status: int = 0
    body: str = ""


@dataclass
class Example:
    server: Server
    db: str
    other: str
    names: list[str]
    tokens: list[str]
    states: list[tuple[Rights, ...]]
    rows: dict[int, Row] = field(default_factory=dict)
    inserts: list[int] = field(default_factory=list)  # the steps that inserted
    waiting: list[tuple[threading.Thread, Answer]] = field(default_factory=list)
    done: int = 0  # steps finished

    def now(self) -> tuple[Rights, ...]:
        return self.states[-1]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("rights-property") / "data"
    with running_server(data) as running:
        yield running


def _markers(text: str) -> list[int]:
    return [int(found) for found in MARKER.findall(text)]


def _apply(server: Server, ex: Example, step: tuple) -> None:
    kind = step[0]
    rights = list(ex.now())
    if kind in ("grant_read", "revoke_read"):
        user = step[1]
        verb = (
            "GRANT READ ON DATABASE {db} TO {u}"
            if kind == "grant_read"
            else ("REVOKE READ ON DATABASE {db} FROM {u}")
        )
        server.sql(verb.format(db=ex.db, u=ex.names[user]), ex.db)
        rights[user] = Rights(kind == "grant_read", rights[user].tables)
    elif kind in ("grant_select", "revoke_select"):
        user, table = step[1], step[2]
        if kind == "grant_select":
            server.sql(f"GRANT SELECT ON {table} TO {ex.names[user]}", ex.db)
        else:
            server.sql(f"REVOKE SELECT ON {table} FROM {ex.names[user]}", ex.db)
        entries = list(rights[user].tables)
        entries[TABLES.index(table)] = "granted" if kind == "grant_select" else "revoked"
        rights[user] = Rights(rights[user].read, tuple(entries))
    elif kind == "insert":
        table, elsewhere = step[1], step[2]
        ident = len(ex.rows) + 1
        db, table = (ex.other, "t0") if elsewhere else (ex.db, table)
        server.sql(f"INSERT INTO {table} VALUES ({ident}, 'mk{ident}x')", db)
        ex.rows[ident] = Row(db, table, len(ex.states))
        if not elsewhere:
            ex.inserts.append(len(ex.states))
    elif kind == "read":
        _read_now(server, ex, step[1], step[2], step[3])
    elif kind == "poll":
        _start_waiting(server, ex, step[1], step[2], step[3])
    ex.states.append(tuple(rights))


def _read_now(server: Server, ex: Example, user: int, table: str, how: str) -> None:
    """A read answered at once: 200 exactly when the model allows, its rows this table's."""
    token = ex.tokens[user]
    if how == "select":
        answer = server.exec(f"SELECT * FROM {table}", ex.db, token=token)
    elif how == "changes()":
        answer = server.exec(f"SELECT * FROM changes('{table}')", ex.db, token=token)
    elif how == "changes":
        answer = server.get(
            "/api/changes", params={"db": ex.db, "table": table, "format": "json"}, token=token
        )
    else:
        query = f"SUBSCRIBE SELECT * FROM {table}"
        answer = server.get(
            "/api/subscribe", params={"db": ex.db, "query": query, "wait": 0}, token=token
        )
    allowed = ex.now()[user].may_read(table)
    assert answer.status_code == (200 if allowed else 403), (how, table, user, answer.text)
    if not allowed:
        assert "READ" in answer.json()["error"], answer.text
    now = len(ex.states) - 1
    _check_answer(ex, Answer(user, table, now, now, 200, answer.text))


def _start_waiting(server: Server, ex: Example, user: int, table: str, how: str) -> None:
    """A long poll left waiting across the next steps (`/api/changes` from the database's
    last LSN, or `/api/subscribe` with the id of a snapshot)."""
    token = ex.tokens[user]
    params: dict[str, str | int] = {"db": ex.db, "wait": WAIT_MS}
    path = "/api/changes"
    if how == "changes":
        head = server.get("/api/changes", params={"db": ex.db, "table": table, "format": "json"})
        params |= {"table": table, "format": "json", "from": head.json()["durable_lsn"]}
    else:
        path = "/api/subscribe"
        query = f"SUBSCRIBE SELECT * FROM {table}"
        first = server.get(
            path, params={"db": ex.db, "query": query, "wait": 0}, token=token, timeout=10
        )
        now = len(ex.states) - 1
        _check_answer(ex, Answer(user, table, now, now, first.status_code, first.text))
        if first.status_code != 200:
            return
        ids = re.findall(r"^id: (\S+)$", first.text, re.M)
        params |= {"query": query, "id": ids[-1]}
    answer = Answer(user, table, len(ex.states) - 1)

    def wait() -> None:
        try:
            response = server.get(path, params=params, token=token, timeout=WAIT_MS / 1000 + 30)
            answer.status, answer.body = response.status_code, response.text
        finally:
            answer.end = ex.done + 1  # the step in flight may have taken effect already

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    ex.waiting.append((thread, answer))


def _check_answer(ex: Example, answer: Answer) -> None:
    """Every row in an answer is of its table in this database, and the user could read
    that table at some moment while the request was open."""
    _no_token(ex, answer.body)
    if answer.status != 200:
        return
    span = ex.states[answer.start : max(answer.end, answer.start) + 1] or [ex.now()]
    for ident in _markers(answer.body):
        row = ex.rows[ident]
        assert (row.db, row.table) == (ex.db, answer.table), (answer, row)
        assert any(state[answer.user].may_read(row.table) for state in span), (answer, row)


def _no_token(ex: Example, text: str) -> None:
    for token in [*ex.tokens, ex.server.token]:
        assert token not in text, "an answer carries a token"


def _stream_row_allowed(ex: Example, user: int, ident: int) -> bool:
    """Readable at its commit, or under a rights change made before the next insert."""
    row = ex.rows[ident]
    if row.db != ex.db:
        return False
    later = [step for step in ex.inserts if step > row.step]
    until = later[0] if later else len(ex.states)
    return any(state[user].may_read(row.table) for state in ex.states[row.step : until])


class StreamWatch:
    """One user's stream, read by a thread into `events` until it ends or is closed."""

    def __init__(self, reader: EventReader) -> None:
        self.reader = reader
        self.events: list[dict] = []
        self.ended = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while (event := self.reader.next_event()) is not None:
                self.events.append(event)
        except (requests.RequestException, OSError, AttributeError, ValueError):
            pass  # closed by the test
        finally:
            self.ended.set()

    def saw(self, ident: int) -> bool:
        return any(ident in _markers(json.dumps(e.get("data"))) for e in self.events)


def _setup(server: Server, initial: tuple[Rights, ...]) -> Example:
    tag = uuid.uuid4().hex[:10]
    db, other = f"rp_{tag}", f"ro_{tag}"
    names = [f"rp{user}_{tag}" for user in USERS]
    server.sql(f"CREATE DATABASE {db}; CREATE DATABASE {other}")
    for table in (*TABLES, "marker"):
        server.sql(f"CREATE TABLE {table} (id INT PRIMARY KEY, note STRING)", db)
    server.sql("CREATE TABLE t0 (id INT PRIMARY KEY, note STRING)", other)
    for user, name in enumerate(names):
        server.sql(f"CREATE USER {name}; GRANT READ ON DATABASE {other} TO {name}", db)
        if initial[user].read:
            server.sql(f"GRANT READ ON DATABASE {db} TO {name}", db)
        for table, entry in zip(TABLES, initial[user].tables, strict=True):
            if entry == "granted":
                server.sql(f"GRANT SELECT ON {table} TO {name}", db)
            elif entry == "revoked":
                server.sql(f"REVOKE SELECT ON {table} FROM {name}", db)
    tokens = [server.new_token(name, db) for name in names]
    return Example(server, db, other, names, tokens, [initial])


def _finish(server: Server, ex: Example, streams: dict[int, StreamWatch]) -> None:
    for thread, answer in ex.waiting:
        thread.join(WAIT_MS / 1000 + 35)
        _check_answer(ex, answer)
    # A stream whose user holds no right left in the database ends by itself.
    for user, watch in streams.items():
        if not ex.now()[user].any_right():
            assert watch.ended.wait(STREAM_END_S), f"user {user}'s stream outlived its rights"
    # Every stream still open delivers a row its user may read (so it has sent all it would).
    ident = len(ex.rows) + 1
    for name in ex.names:
        server.sql(f"GRANT SELECT ON marker TO {name}", ex.db)
    server.sql(f"INSERT INTO marker VALUES ({ident}, 'mk{ident}x')", ex.db)
    ex.rows[ident] = Row(ex.db, "marker", len(ex.states))
    deadline = time.monotonic() + 15
    for user, watch in streams.items():
        while not watch.saw(ident) and not watch.ended.is_set():
            assert time.monotonic() < deadline, f"user {user}'s stream missed the marker"
            time.sleep(0.05)
        for event in list(watch.events):
            text = json.dumps(event.get("data"))
            _no_token(ex, text)
            for found in _markers(text):
                if found == ident:
                    continue
                assert _stream_row_allowed(ex, user, found), (user, ex.rows[found], ex.states)


def _run(server: Server, initial: tuple[Rights, ...], steps: list[tuple]) -> None:
    ex = _setup(server, initial)
    streams: dict[int, StreamWatch] = {}
    try:
        for user in USERS:
            reader = open_stream(server, ex.db, token=ex.tokens[user], read_timeout=60)
            if initial[user].any_right():
                assert reader.status == 200, reader.response.text
                streams[user] = StreamWatch(reader)
            else:
                assert reader.status == 403, reader.response.text
                _no_token(ex, reader.response.text)
                reader.close()
        for step in steps:
            _apply(server, ex, step)
            ex.done += 1
        _finish(server, ex, streams)
    finally:
        # Dropping the database ends its streams, and so their readers' threads.
        server.sql(f"DROP DATABASE {ex.db}; DROP DATABASE {ex.other}")
        for watch in streams.values():
            watch.thread.join(10)
            watch.reader.close()
        for name in ex.names:
            server.sql(f"DROP USER {name}")


users = st.sampled_from(USERS)
tables = st.sampled_from(TABLES)
rights = st.builds(
    Rights,
    st.booleans(),
    st.tuples(*[st.sampled_from([None, "granted", "revoked"])] * len(TABLES)),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["grant_read", "revoke_read"]), users),
        st.tuples(st.sampled_from(["grant_select", "revoke_select"]), users, tables),
        st.tuples(st.just("insert"), tables, st.booleans()),
        st.tuples(st.just("insert"), tables, st.just(False)),
        st.tuples(
            st.just("read"),
            users,
            tables,
            st.sampled_from(["select", "changes()", "changes", "subscribe"]),
        ),
        st.tuples(st.just("poll"), users, tables, st.sampled_from(["changes", "subscribe"])),
    ),
    min_size=1,
    max_size=14,
)
HEALTH = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large]


# The default run stays under a minute, so it does not shrink (a server round trip per
# step makes shrinking take minutes); the long run shrinks what it finds.
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=HEALTH,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(initial=st.tuples(rights, rights), steps=steps)
def test_readers_never_see_beyond_their_rights(
    server: Server, initial: tuple[Rights, ...], steps: list[tuple]
) -> None:
    _run(server, initial, steps)


@pytest.mark.long
@settings(max_examples=150, deadline=None, suppress_health_check=HEALTH)
@given(initial=st.tuples(rights, rights), steps=steps)
def test_readers_never_see_beyond_their_rights_long(
    server: Server, initial: tuple[Rights, ...], steps: list[tuple]
) -> None:
    _run(server, initial, steps)

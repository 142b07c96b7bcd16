"""Live queries (spec: GET /api/subscribe), driven through SubscriptionManager.ask directly.

The central property: a client that keeps the snapshot and applies every `rows` answer by
the rule of the protocol always holds what the query answers when run afresh.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_kept import KEPT_VERSIONS
from refimpl.engine.features.live_queries import MAX_ROWS, Reply, SubscriptionManager
from refimpl.errors import (
    AnswersMoreThanOnce,
    BadRequest,
    Forbidden,
    NotAllowed,
    ResultTooLarge,
    SqlError,
    UnknownTable,
)
from tests.engine.features.live_scenarios import commit_or_roll_back, on_fresh_database, rounds
from tests.hypothesis_settings import OVER_FIXTURE

# Three tables of the same columns: a DEDUP key with the time, no key at all, and a primary
# key without the time. All have `sym` as their rev column (SYMBOL(sym) of PARTITION BY).
TABLES = {
    "keyed": "CREATE TABLE keyed (time TIMESTAMP, sym SYMBOL, v INT) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym) SORT BY (sym, time) DEDUP KEY (sym, time)",
    "rowid": "CREATE TABLE rowid (time TIMESTAMP, sym SYMBOL, v INT) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym)",
    "pk": "CREATE TABLE pk (id INT PRIMARY KEY, time TIMESTAMP, sym SYMBOL, v INT)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(sym)",
}
KEYS = {"keyed": "sym, time", "rowid": None, "pk": "id"}
ASKS = ["ask", "ask", "ask", "lose", "stale"]  # how the client asks after a round's commits
SYMBOLS = ["A", "B", "C"]


class Client:
    """What a client of /api/subscribe holds, built only from the answers."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.key: list[int] | None = None
        self.rows: list[tuple] = []

    def apply(self, reply) -> None:
        if reply.kind == "snapshot":
            subscription = reply.subscription
            names = [c.name for c in subscription.columns]
            self.key = (
                None
                if subscription.whole_row
                else [names.index(n) for n in subscription.key_columns]
            )
            self.rows = list(reply.rows)
        elif reply.kind == "rows":
            if self.key is None:
                for removed in reply.removed_keys:
                    self.rows.remove(tuple(removed))  # one equal row per removed key
                self.rows += reply.rows
            else:
                key = self.key
                by_key = {tuple(r[i] for i in key): r for r in self.rows}
                for removed in reply.removed_keys:
                    del by_key[tuple(removed)]
                for row in reply.rows:
                    by_key[tuple(row[i] for i in key)] = row
                self.rows = list(by_key.values())
        else:
            assert reply.kind == "none"
            assert not reply.rows and not reply.removed_keys
        self.id = reply.id


def multiset(rows) -> Counter:
    return Counter(tuple(r) for r in rows)


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    for create in TABLES.values():
        connection.execute(create)
    yield connection
    connection.close()


def _time(minute: int, second: int = 0) -> str:
    return f"2026-01-01T{minute // 60:02d}:{minute % 60:02d}:{second:02d}Z"


# -- the property -----------------------------------------------------------------------


@st.composite
def queries(draw, table: str) -> str:
    kind = draw(
        st.sampled_from(
            ["plain_key", "plain", "by_sym", "by_bucket", "by_both", "aggregate", "distinct"]
        )
    )
    where = draw(st.sampled_from(["", "sym = 'A'", "v > 2", "sym = 'B' AND v < 5"]))
    top = draw(st.sampled_from([None, 1, 3]))
    key = KEYS[table]
    if kind == "plain_key":
        if key is None:
            kind = "plain"
        else:
            items, group, order = f"{key}, v", "", f"v DESC, {key}"
    if kind == "plain":
        items, group, order = "sym, v", "", "v, sym"
    elif kind == "by_sym":
        items, group, order = "sym, count(*) AS n, sum(v) AS s", "sym", "s DESC, sym"
    elif kind == "by_bucket":
        unit = draw(st.sampled_from(["minute", "hour"]))
        items = (
            f"date_trunc('{unit}', time) AS b, count(*) AS n, sum(v) AS s, first(v) AS f,"
            " last(v) AS l, min(v) AS lo"
        )
        group, order = "b", "b DESC"
    elif kind == "by_both":
        items = "date_trunc('minute', time) AS b, sym, count(*) AS n, max(v) AS hi"
        group, order = "b, sym", "b, sym"
    elif kind == "aggregate":
        items, group, order = "count(*) AS n, sum(v) AS s, max(v) AS hi", "", ""
        top = None
    elif kind == "distinct":
        items, group, order = "DISTINCT sym", "", "sym"
    text = f"SUBSCRIBE SELECT {items} FROM {table}"
    if where:
        text += f" WHERE {where}"
    if group:
        text += f" GROUP BY {group}"
    if top is not None and order:
        text += f" ORDER BY {order} LIMIT {top}"
    return text


def _insert(table: str, minute: int, second: int, sym: str, v: int, ident: int):
    if table == "pk":
        return f"INSERT INTO pk VALUES ({ident}, '{_time(minute, second)}', '{sym}', {v})"
    return f"INSERT INTO {table} VALUES ('{_time(minute, second)}', '{sym}', {v})"


@st.composite
def writes(draw, table: str) -> str:
    minute = st.integers(0, 3)
    second = st.sampled_from([0, 30])
    sym = st.sampled_from(SYMBOLS)
    value = st.integers(0, 7)
    kind = draw(
        st.sampled_from(
            [
                "insert",
                "insert",
                "insert",
                "set_v",
                "move_time",
                "move_sym",
                "delete",
                "delete_one",
                "truncate",
                "noop",
            ]
        )
    )
    if kind == "insert":
        return _insert(
            table, draw(minute), draw(second), draw(sym), draw(value), draw(st.integers(0, 8))
        )
    if kind == "set_v":
        return f"UPDATE {table} SET v = {draw(value)} WHERE sym = '{draw(sym)}' AND v < 4"
    if kind == "move_time":
        # Moves rows to another time bucket (a DEDUP clash replaces the row there).
        return (
            f"UPDATE {table} SET time = '{_time(draw(minute), draw(second))}'"
            f" WHERE v = {draw(value)}"
        )
    if kind == "move_sym":
        return f"UPDATE {table} SET sym = '{draw(sym)}' WHERE v = {draw(value)}"
    if kind == "delete":
        return f"DELETE FROM {table} WHERE sym = '{draw(sym)}' AND v >= {draw(value)}"
    if kind == "delete_one":
        return f"DELETE FROM {table} WHERE v = {draw(value)}"
    if kind == "truncate":
        return f"TRUNCATE {table}"
    return f"UPDATE {table} SET v = v WHERE v > 100"


@st.composite
def scenarios(draw):
    table = draw(st.sampled_from(sorted(TABLES)))
    query = draw(queries(table))
    initial = draw(st.lists(writes(table), max_size=4))
    return table, query, initial, draw(rounds(writes(table), ASKS, 10))


def check_scenario(conn, table, query, initial, commit_rounds) -> None:
    manager = conn.instance.subscriptions
    writer, reader, asker = conn.session(), conn.session(), conn.session()
    fresh_text = query.removeprefix("SUBSCRIBE ")
    for statement in initial:
        commit_or_roll_back(writer, [statement])
    client = Client()

    def fresh() -> Counter:
        return multiset(reader.execute(fresh_text).rows)

    client.apply(manager.ask_now(asker, query, None))
    assert multiset(client.rows) == fresh(), "snapshot"
    for commits, how in commit_rounds:
        for statements in commits:
            commit_or_roll_back(writer, statements)
        if how == "lose" and commits:
            lost = manager.ask_now(asker, query, client.id)  # this answer never arrives
            again = manager.ask_now(asker, query, client.id)
            assert (again.kind, again.id, again.rows, again.removed_keys) == (
                lost.kind,
                lost.id,
                lost.rows,
                lost.removed_keys,
            ) or lost.kind == "none"
            client.apply(again)
        elif how == "stale":
            # An id with a version the server does not keep: a fresh snapshot.
            assert client.id is not None  # it has had an answer
            name = client.id.rpartition(".")[0]
            reply = manager.ask_now(asker, query, f"{name}.999999")
            assert reply.kind == "snapshot"
            client.apply(reply)
        else:
            client.apply(manager.ask_now(asker, query, client.id))
        assert multiset(client.rows) == fresh(), (commits, how)


@settings(OVER_FIXTURE, max_examples=120)
@given(scenario=scenarios())
def test_client_copy_always_equals_a_fresh_run(tmp_path_factory, scenario):
    _run(tmp_path_factory, scenario)


@pytest.mark.long
@settings(OVER_FIXTURE, max_examples=2000)
@given(scenario=scenarios())
def test_client_copy_always_equals_a_fresh_run_long(tmp_path_factory, scenario):
    _run(tmp_path_factory, scenario)


def _run(tmp_path_factory, scenario) -> None:
    table, query, initial, commit_rounds = scenario
    on_fresh_database(
        tmp_path_factory.mktemp("sub"),
        TABLES[table],
        lambda conn: check_scenario(conn, table, query, initial, commit_rounds),
    )


# -- examples the property found, kept as plain tests ------------------------------------


@pytest.mark.parametrize("table", ["rowid", "pk"])
def test_bucket_query_sees_a_row_leave_its_bucket(conn, table):
    """An UPDATE of the time of a row whose key has no time moves it out of its bucket."""
    writer = conn.session()
    writer.execute(_insert(table, 0, 10, "A", 1, 1))
    writer.execute(_insert(table, 1, 10, "A", 2, 2))
    query = (
        f"SUBSCRIBE SELECT date_trunc('minute', time) AS b, count(*) AS n, sum(v) AS s"
        f" FROM {table} GROUP BY b"
    )
    check_scenario(
        conn,
        table,
        query,
        [],
        [([[f"UPDATE {table} SET time = '{_time(2, 10)}' WHERE v = 1"]], "ask")],
    )


def test_bucket_query_sees_a_dedup_row_replaced(conn):
    writer = conn.session()
    writer.execute(_insert("keyed", 0, 0, "A", 1, 0))
    writer.execute(_insert("keyed", 1, 0, "A", 2, 0))
    query = "SUBSCRIBE SELECT date_trunc('minute', time) AS b, count(*) AS n FROM keyed GROUP BY b"
    check_scenario(
        conn,
        "keyed",
        query,
        [],
        [
            ([[f"UPDATE keyed SET time = '{_time(1, 0)}' WHERE v = 1"]], "ask"),
            ([["DELETE FROM keyed WHERE v = 1"]], "ask"),
        ],
    )


def test_window_row_that_drops_behind_a_row_pushed_out_in_the_same_commit(conn):
    """A top-1 window holds A (v=1); one commit inserts B (v=1: it sorts after A and is
    pushed out) and then lowers A to 0: B now comes first, though the window had room for
    A again when A left it."""
    query = "SUBSCRIBE SELECT sym, time, v FROM keyed ORDER BY v DESC, sym, time LIMIT 1"
    check_scenario(
        conn,
        "keyed",
        query,
        [_insert("keyed", 0, 0, "A", 1, 0)],
        [([[_insert("keyed", 0, 0, "B", 1, 0), _insert("keyed", 0, 0, "A", 0, 0)]], "ask")],
    )


# -- the protocol ------------------------------------------------------------------------


CANDLES = (
    "SUBSCRIBE SELECT date_trunc('minute', time) AS m, first(v) AS open, max(v) AS high,"
    " min(v) AS low, last(v) AS close FROM keyed WHERE sym = 'A' GROUP BY m ORDER BY m"
)


def test_snapshot_then_only_the_changed_bucket(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    conn.execute(_insert("keyed", 0, 0, "A", 1, 0))
    conn.execute(_insert("keyed", 1, 0, "A", 5, 0))
    snapshot = manager.ask_now(session, CANDLES, None)
    assert snapshot.kind == "snapshot"
    assert snapshot.subscription.key_columns == ["m"]
    assert snapshot.subscription.symbol == "A"
    assert snapshot.id.endswith(".1")
    assert len(snapshot.rows) == 2
    # Nothing changed: kind none, the same id.
    nothing = manager.ask_now(session, CANDLES, snapshot.id)
    assert (nothing.kind, nothing.id) == ("none", snapshot.id)
    conn.execute(_insert("keyed", 1, 30, "A", 9, 0))
    conn.execute(_insert("keyed", 1, 40, "B", 9, 0))
    reply = manager.ask_now(session, CANDLES, snapshot.id)
    assert reply.kind == "rows"
    assert reply.rows == [(snapshot.rows[1][0], 5, 9, 5, 9)]
    assert reply.removed_keys == []
    assert reply.id.endswith(".2")
    conn.execute("DELETE FROM keyed WHERE sym = 'A' AND v = 1")
    reply = manager.ask_now(session, CANDLES, reply.id)
    assert (reply.kind, reply.rows, reply.removed_keys) == ("rows", [], [(snapshot.rows[0][0],)])


def test_a_lost_answer_is_answered_again(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    query = "SUBSCRIBE SELECT sym, v FROM keyed"
    snapshot = manager.ask_now(session, query, None)
    conn.execute(_insert("keyed", 0, 0, "A", 1, 0))
    lost = manager.ask_now(session, query, snapshot.id)
    assert lost.kind == "rows" and lost.rows == [("A", 1)]
    again = manager.ask_now(session, query, snapshot.id)
    assert (again.kind, again.id, again.rows, again.removed_keys) == (
        "rows",
        lost.id,
        lost.rows,
        lost.removed_keys,
    )
    # Further commits: the old id gets everything since its version, at once.
    conn.execute(_insert("keyed", 0, 0, "B", 2, 0))
    newest = manager.ask_now(session, query, lost.id)
    from_old = manager.ask_now(session, query, snapshot.id)
    assert from_old.id == newest.id
    assert multiset(from_old.rows) == multiset([("A", 1), ("B", 2)])


def test_unknown_ids_and_versions_give_a_fresh_snapshot(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    query = "SUBSCRIBE SELECT sym, v FROM rowid"
    snapshot = manager.ask_now(session, query, None)
    name = snapshot.id.rpartition(".")[0]
    for asked in ["0123456789abcdef.1", f"{name}.0", f"{name}.2", f"{name}.77"]:
        reply = manager.ask_now(session, query, asked)
        assert reply.kind == "snapshot", asked
        assert reply.id != snapshot.id
    # Versions older than the kept ones.
    current = snapshot.id
    for value in range(KEPT_VERSIONS + 2):
        conn.execute(_insert("rowid", 0, 0, "A", value, 0))
        current = manager.ask_now(session, query, current).id
    assert manager.ask_now(session, query, snapshot.id).kind == "snapshot"
    assert manager.ask_now(session, query, current).kind == "none"
    # Another query or another user with the id: a snapshot of their own.
    assert manager.ask_now(session, query + " WHERE v > 1", current).kind == "snapshot"
    conn.execute("CREATE USER bob")
    conn.execute("GRANT READ ON DATABASE demo TO bob")
    bob = conn.instance.session("demo", Principal("bob"))
    assert manager.ask_now(bob, query, current).kind == "snapshot"
    for bad in ["nodot", "abc.", "abc.x", ".5"]:
        with pytest.raises(BadRequest):
            manager.ask_now(session, query, bad)


def test_rights_are_the_callers(conn):
    conn.execute("CREATE USER eve")
    eve = conn.instance.session("demo", Principal("eve"))
    with pytest.raises(Exception) as raised:
        conn.instance.subscriptions.ask_now(eve, "SUBSCRIBE SELECT * FROM keyed", None)
    assert type(raised.value).__name__ in ("Forbidden", "Unauthorized")


def ask_and_wait(manager, session, query, asked, wait):
    """Drive a `LiveWait` as a server does: watch, attempt at each wake-up, expire."""
    step = manager.ask(session, query, asked)
    if isinstance(step, Reply):
        return step
    woken = threading.Event()
    step.watch(woken)
    deadline = time.monotonic() + wait
    while True:
        reply = step.attempt()
        if reply is not None:
            return reply
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return step.expire()
        woken.wait(remaining)
        woken.clear()


def _ask_in_thread(manager, session, query, asked, wait):
    out: dict = {}

    def run() -> None:
        began = time.monotonic()
        try:
            out["reply"] = ask_and_wait(manager, session, query, asked, wait)
        except Exception as error:  # reported by the test
            out["error"] = error
        out["seconds"] = time.monotonic() - began

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def _wait_until_waiting(manager, count=1, timeout=5.0):
    deadline = time.monotonic() + timeout
    while manager.stats()["waiting"] < count:
        assert time.monotonic() < deadline, "the ask never started waiting"
        time.sleep(0.005)


def test_a_second_ask_takes_over_a_waiting_one(conn):
    manager = conn.instance.subscriptions
    query = "SUBSCRIBE SELECT sym, v FROM keyed"
    snapshot = manager.ask_now(conn.session(), query, None)
    first, out = _ask_in_thread(manager, conn.session(), query, snapshot.id, 10.0)
    _wait_until_waiting(manager)
    second, out2 = _ask_in_thread(manager, conn.session(), query, snapshot.id, 5.0)
    first.join(3.0)
    assert not first.is_alive(), "the first ask still waits"
    assert out["reply"].kind == "none" and out["seconds"] < 3.0
    # The new one waits on, and answers the next commit.
    _wait_until_waiting(manager)
    conn.execute(_insert("keyed", 0, 0, "A", 1, 0))
    second.join(5.0)
    assert out2["reply"].kind == "rows" and out2["reply"].rows == [("A", 1)]
    assert out2["seconds"] < 3.0


def _count_moved_checks(manager, monkeypatch) -> list[int]:
    """How many times a wait read its query's revision counter (`counter_of`) to see
    whether a commit moved it."""
    calls = [0]
    original = manager.counter_of

    def counted(subscription):
        calls[0] += 1
        return original(subscription)

    monkeypatch.setattr(manager, "counter_of", counted)
    return calls


def test_a_pinned_subscription_wakes_only_on_its_symbol(conn, monkeypatch):
    manager = conn.instance.subscriptions
    pinned = "SUBSCRIBE SELECT time, v FROM keyed WHERE sym = 'A'"
    snapshot = manager.ask_now(conn.session(), pinned, None)
    assert snapshot.subscription.symbol == "A"
    checks = _count_moved_checks(manager, monkeypatch)
    thread, out = _ask_in_thread(manager, conn.session(), pinned, snapshot.id, 0.6)
    _wait_until_waiting(manager)
    for second in range(3):
        conn.execute(_insert("keyed", 0, second, "B", 1, 0))
    conn.execute(_insert("rowid", 0, 0, "A", 1, 0))  # another table
    thread.join(5.0)
    assert out["reply"].kind == "none"
    assert out["seconds"] >= 0.55
    # One check before waiting and one when the wait ends; a wake would add more.
    assert checks[0] == 2, "a commit of another symbol woke the pinned subscription"
    # Its own symbol wakes it at once.
    thread, out = _ask_in_thread(manager, conn.session(), pinned, snapshot.id, 5.0)
    _wait_until_waiting(manager)
    conn.execute(_insert("keyed", 0, 0, "A", 7, 0))
    thread.join(5.0)
    assert out["reply"].kind == "rows" and out["seconds"] < 2.0
    assert [row[1] for row in out["reply"].rows] == [7]


def test_an_unpinned_subscription_wakes_on_any_commit_of_its_table(conn):
    manager = conn.instance.subscriptions
    query = "SUBSCRIBE SELECT count(*) AS n FROM keyed"
    snapshot = manager.ask_now(conn.session(), query, None)
    thread, out = _ask_in_thread(manager, conn.session(), query, snapshot.id, 5.0)
    _wait_until_waiting(manager)
    conn.execute(_insert("keyed", 0, 0, "C", 1, 0))
    thread.join(5.0)
    assert out["reply"].kind == "rows" and out["reply"].rows == [(1,)]
    assert out["seconds"] < 2.0


def test_a_commit_that_changes_nothing_in_the_answer_keeps_waiting(conn):
    manager = conn.instance.subscriptions
    query = "SUBSCRIBE SELECT sym, v FROM keyed WHERE v > 5"
    snapshot = manager.ask_now(conn.session(), query, None)
    thread, out = _ask_in_thread(manager, conn.session(), query, snapshot.id, 0.5)
    _wait_until_waiting(manager)
    conn.execute(_insert("keyed", 0, 0, "A", 1, 0))  # outside the WHERE
    thread.join(5.0)
    assert out["reply"].kind == "none" and out["seconds"] >= 0.45
    assert out["reply"].id == snapshot.id


def test_more_than_max_rows_is_an_error(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    rows = [(i, i * 1_000_000, "A", 0) for i in range(MAX_ROWS)]
    session.insert_rows("pk", ["id", "time", "sym", "v"], rows)
    query = "SUBSCRIBE SELECT id, v FROM pk"
    snapshot = manager.ask_now(session, query, None)
    assert len(snapshot.rows) == MAX_ROWS
    conn.execute(f"INSERT INTO pk VALUES ({MAX_ROWS}, 0, 'A', 0)")
    with pytest.raises(ResultTooLarge):
        manager.ask_now(session, query, snapshot.id)
    with pytest.raises(ResultTooLarge):
        manager.ask_now(session, query, None)
    # Narrowed, it works.
    assert len(manager.ask_now(session, query + " WHERE id < 10", None).rows) == 10


def test_the_subscription_limit_evicts_the_longest_unasked(conn, monkeypatch):
    manager = SubscriptionManager(limit=3)
    monkeypatch.setattr(conn.instance, "subscriptions", manager)
    session = conn.session()
    texts = [f"SUBSCRIBE SELECT sym, v FROM keyed WHERE v > {i}" for i in range(4)]
    ids = [manager.ask_now(session, texts[i], None).id for i in range(3)]
    assert len(manager) == 3
    # Asking each one by its id at the limit answers it, and evicts nothing.
    for i in (0, 2):
        reply = manager.ask_now(session, texts[i], ids[i])
        assert (reply.kind, reply.id) == ("none", ids[i])
        assert len(manager) == 3
    # A fourth: the one asked for longest ago (1) makes room.
    ids.append(manager.ask_now(session, texts[3], None).id)
    assert len(manager) == 3
    for i in (0, 2, 3):
        assert manager.ask_now(session, texts[i], ids[i]).kind == "none"
    assert manager.ask_now(session, texts[1], ids[1]).kind == "snapshot"
    assert len(manager) == 3


def test_idle_subscriptions_are_dropped(conn, monkeypatch):
    manager = SubscriptionManager(idle_seconds=0.05)
    monkeypatch.setattr(conn.instance, "subscriptions", manager)
    session = conn.session()
    query = "SUBSCRIBE SELECT sym, v FROM keyed"
    snapshot = manager.ask_now(session, query, None)
    assert manager.ask_now(session, query, snapshot.id).kind == "none"  # asked in time
    time.sleep(0.12)
    other = manager.ask_now(session, query + " WHERE v > 1", None)  # sweeps the idle one
    assert len(manager) == 1
    reply = manager.ask_now(session, query, snapshot.id)
    assert reply.kind == "snapshot" and reply.id != snapshot.id
    assert other.id != reply.id


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("SUBSCRIBE SELECT * FROM keyed JOIN rowid ON keyed.v = rowid.v", SqlError),
        ("SUBSCRIBE SELECT v FROM keyed UNION SELECT v FROM rowid", SqlError),
        ("WITH x AS (SELECT v FROM keyed) SUBSCRIBE SELECT v FROM x", SqlError),
        ("SUBSCRIBE SELECT * FROM changes('keyed')", NotAllowed),
        ("SUBSCRIBE SELECT 1", NotAllowed),
        ("SELECT * FROM keyed", SqlError),
        ("SUBSCRIBE SELECT * FROM keyed; SUBSCRIBE SELECT * FROM rowid", SqlError),
        ("SUBSCRIBE SELECT * FROM keyed WHERE v = ?", SqlError),
        ("SUBSCRIBE SELECT * FROM nope", UnknownTable),
    ],
)
def test_one_table_only(conn, text, error):
    with pytest.raises(error):
        conn.instance.subscriptions.ask_now(conn.session(), text, None)
    assert len(conn.instance.subscriptions) == 0


def test_subscribe_as_a_statement_is_refused_naming_no_route(conn):
    # The engine names no route: the HTTP and protocol layers word where SUBSCRIBE is served.
    with pytest.raises(AnswersMoreThanOnce, match="SUBSCRIBE answers more than once") as refused:
        conn.execute("SUBSCRIBE SELECT * FROM keyed")
    assert refused.value.served_at is None and "/api/" not in str(refused.value)


@pytest.mark.parametrize(
    "query",
    [
        "SUBSCRIBE SELECT sym, v FROM keyed",
        "SUBSCRIBE SELECT date_trunc('minute', time) AS b, count(*) AS n FROM keyed GROUP BY b",
    ],
)
def test_a_dropped_table_is_an_error_not_a_crash(conn, query):
    manager = conn.instance.subscriptions
    conn.execute(_insert("keyed", 0, 0, "A", 1, 0))
    snapshot = manager.ask_now(conn.session(), query, None)
    conn.execute("DROP TABLE keyed")
    with pytest.raises(UnknownTable):
        manager.ask_now(conn.session(), query, snapshot.id)


# -- per-user bounds (issue 13) --------------------------------------------------------------


def _user_session(conn, name: str):
    conn.execute(f"CREATE USER {name}")
    conn.execute(f"GRANT READ ON DATABASE demo TO {name}")
    return conn.instance.session("demo", Principal(name))


def test_one_user_over_its_cap_makes_room_from_its_own(conn, monkeypatch):
    manager = SubscriptionManager(per_user=3)
    monkeypatch.setattr(conn.instance, "subscriptions", manager)
    alice, bob = _user_session(conn, "alice"), _user_session(conn, "bob")
    texts = [f"SUBSCRIBE SELECT sym, v FROM keyed WHERE v > {i}" for i in range(10)]
    bobs = manager.ask_now(bob, texts[0], None).id
    alices = [manager.ask_now(alice, texts[i], None).id for i in range(3)]
    manager.ask_now(alice, texts[0], alices[0])  # asked again: now 1 is asked longest ago
    for i in range(3, 10):  # many more than the cap: only alice's own make room
        alices.append(manager.ask_now(alice, texts[i], None).id)
    assert len(manager) == 4
    reply = manager.ask_now(bob, texts[0], bobs)
    assert (reply.kind, reply.id) == ("none", bobs)
    for i in range(7, 10):
        assert manager.ask_now(alice, texts[i], alices[i]).kind == "none"
    assert manager.ask_now(alice, texts[1], alices[1]).kind == "snapshot"


def test_rows_a_user_keeps_are_bounded_across_versions(conn, monkeypatch):
    manager = SubscriptionManager(rows_per_user=25)
    monkeypatch.setattr(conn.instance, "subscriptions", manager)
    conn.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
    conn.execute("INSERT INTO big VALUES " + ", ".join(f"({n}, 0)" for n in range(10)))
    alice, bob = _user_session(conn, "alice"), _user_session(conn, "bob")
    texts = [f"SUBSCRIBE SELECT id, v FROM big WHERE id >= {i}" for i in range(3)]
    bobs = manager.ask_now(bob, texts[0], None).id
    first = manager.ask_now(alice, texts[0], None)  # 10 rows kept
    second = manager.ask_now(alice, texts[1], None)  # 19
    assert len(manager) == 3
    conn.execute("UPDATE big SET v = 1")
    # A new version of the second: 9 more rows kept (28 > 25): the first makes room.
    assert manager.ask_now(alice, texts[1], second.id).kind == "rows"
    assert manager.ask_now(alice, texts[0], first.id).kind == "snapshot"
    assert manager.ask_now(bob, texts[0], bobs).kind == "rows"  # bob's is bob's


def test_rows_kept_are_counted_through_versions_of_one_size_and_growth(conn, monkeypatch):
    """A new version as big as the one it pushes out leaves the count as it was (the
    manager's lock is not taken for it); the count always equals the kept versions' rows."""
    manager = SubscriptionManager(rows_per_user=1000)
    monkeypatch.setattr(conn.instance, "subscriptions", manager)
    conn.execute("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
    conn.execute("INSERT INTO big VALUES " + ", ".join(f"({n}, 0)" for n in range(10)))
    alice = _user_session(conn, "alice")
    texts = ["SUBSCRIBE SELECT id, v FROM big", "SUBSCRIBE SELECT id, v FROM big WHERE id < 5"]
    ids = [manager.ask_now(alice, text, None).id for text in texts]
    for n in range(1, 14):
        if n % 5 == 0:
            conn.execute(f"INSERT INTO big VALUES ({100 + n}, {n})")  # the first grows
        else:
            conn.execute(f"UPDATE big SET v = {n}")
        ids = [manager.ask_now(alice, text, i).id for text, i in zip(texts, ids, strict=True)]
        kept = sum(
            len(version.rows)
            for subscription in manager._owned["alice"].values()
            for version in subscription.versions.values()
        )
        assert manager._kept_rows["alice"] == kept


def test_rights_are_checked_again_before_a_kept_version_is_answered(conn):
    manager = conn.instance.subscriptions
    alice = _user_session(conn, "alice")
    text = "SUBSCRIBE SELECT sym, v FROM keyed"
    conn.execute(f"INSERT INTO keyed VALUES ('{_time(1)}', 'A', 1)")
    first = manager.ask_now(alice, text, None)
    conn.execute(f"INSERT INTO keyed VALUES ('{_time(2)}', 'B', 2)")
    assert manager.ask_now(alice, text, first.id).kind == "rows"  # version 2 kept now
    conn.execute("REVOKE READ ON DATABASE demo FROM alice")
    with pytest.raises(Forbidden):
        manager.ask_now(alice, text, first.id)  # the kept difference is not answered
    with pytest.raises(Forbidden):
        manager.ask_now(alice, text, None)

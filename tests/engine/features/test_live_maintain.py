"""Maintained live queries (spec: subscribe, "Maintained answers"): after any sequence of
commits, the answer a maintainer keeps equals a fresh run of the query, row for row and in
the query's order, over tables with and without before-images, keyed or not."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features.live_maintainers import Maintainers
from refimpl.engine.features.live_queries import SubscriptionManager
from tests.engine.features.live_scenarios import commit_or_roll_back
from tests.hypothesis_settings import OVER_FIXTURE

COLUMNS = "time TIMESTAMP, sym SYMBOL, v INT, p DOUBLE"
TABLES = {
    "keyed": f"CREATE TABLE keyed ({COLUMNS}) TIMESERIES(time) PARTITION BY DAY, SYMBOL(sym)"
    " SORT BY (sym, time) DEDUP KEY (sym, time)",
    "rowid": f"CREATE TABLE rowid ({COLUMNS}) TIMESERIES(time) PARTITION BY DAY, SYMBOL(sym)",
    "pk": f"CREATE TABLE pk (id INT PRIMARY KEY, {COLUMNS}) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(sym)",
    "bag": "CREATE TABLE bag (time TIMESTAMP, sym STRING, v INT, p DOUBLE)",
}
SYMBOLS = ["A", "B", "C"]
# Each shape the spec maintains; {t} is the table. `ordered`: the ORDER BY is a total
# order, so the answer's order is compared too.
QUERIES = [
    (
        "SELECT sym, count(*) AS n, sum(v) AS s, avg(v) AS a, min(p) AS lo, max(p) AS hi,"
        " first(p) AS f, last(v) AS l, count(p) AS np FROM {t} GROUP BY sym ORDER BY sym",
        True,
    ),
    (
        "SELECT date_trunc('hour', time) AS b, count(*) AS n, sum(p) AS s, avg(p) AS a,"
        " first(p) AS o, max(p) AS h, min(p) AS l, last(p) AS c FROM {t} WHERE sym = 'A'"
        " GROUP BY b ORDER BY b",
        True,
    ),
    ("SELECT count(*) AS n, sum(p) AS s, max(v) AS hi, min(v) AS lo FROM {t} WHERE v > 2", True),
    ("SELECT sym, v, p FROM {t} WHERE v >= 3 ORDER BY v, p, sym", True),
    (
        "SELECT sym, sum(v) AS s, max(p) - min(p) AS spread FROM {t} GROUP BY sym"
        " HAVING count(*) > 1 ORDER BY s DESC, sym",
        True,
    ),
    ("SELECT sum(v) AS s FROM {t} GROUP BY sym", False),
    ("SELECT * FROM {t} WHERE p > 1.5", True),
    ("SELECT sym AS name, v * 2 AS twice FROM {t} WHERE sym <> 'C'", True),
    # Ordered windows: ties in the ORDER BY keep the order a run reads them in.
    ("SELECT sym, v, p FROM {t} WHERE v >= 1 ORDER BY p DESC, v LIMIT 3", True),
    ("SELECT v, p FROM {t} ORDER BY p NULLS FIRST, v LIMIT 4 OFFSET 1", True),
    ("SELECT sym, v FROM {t} ORDER BY v DESC LIMIT 2", True),
]
PRICES = [0.1, 0.2, 0.3, 1e16, -1e16, 2.5, 7.0, None]


def _time(step: int) -> str:
    """Half hours from 2026-01-01 on: two days, so several partitions of a day."""
    return f"2026-01-{1 + step // 48:02d}T{step % 48 // 2:02d}:{30 * (step % 2):02d}:00Z"


@st.composite
def writes(draw, table: str) -> str:
    step = draw(st.integers(0, 95))
    sym = draw(st.sampled_from(SYMBOLS))
    value = draw(st.integers(0, 7))
    price = draw(st.sampled_from(PRICES))
    price_text = "NULL" if price is None else repr(price)
    kind = draw(
        st.sampled_from(
            ["insert"] * 4 + ["set_v", "set_p", "move_time", "move_sym", "delete", "ddl", "noop"]
        )
    )
    if kind == "insert":
        ident = f"{draw(st.integers(0, 12))}, " if table == "pk" else ""
        return (
            f"INSERT INTO {table} VALUES ({ident}'{_time(step)}', '{sym}', {value}, {price_text})"
        )
    if kind == "set_v":
        return f"UPDATE {table} SET v = {value} WHERE sym = '{sym}' AND v < 4"
    if kind == "set_p":
        return f"UPDATE {table} SET p = {price_text} WHERE v = {value}"
    if kind == "move_time":
        return f"UPDATE {table} SET time = '{_time(step)}' WHERE v = {value}"
    if kind == "move_sym":
        return f"UPDATE {table} SET sym = '{sym}' WHERE v = {value}"
    if kind == "delete":
        return f"DELETE FROM {table} WHERE sym = '{sym}' AND v >= {value}"
    if kind == "ddl":
        mode = draw(st.sampled_from(["FULL", "DEFAULT"]))
        return f"ALTER TABLE {table} REPLICA IDENTITY {mode}"
    return f"UPDATE {table} SET v = v WHERE v > 100"


@st.composite
def scenarios(draw):
    table = draw(st.sampled_from(sorted(TABLES)))
    before_images = draw(st.booleans())
    query, ordered = draw(st.sampled_from(QUERIES))
    # offsets=true (moves in each answer) needs a window over a table with a key.
    offsets = "LIMIT" in query and table in ("keyed", "pk") and draw(st.booleans())
    if table == "bag" and "date_trunc" in query:
        query = query.replace("date_trunc('hour', time)", "time")
    commits = st.lists(st.lists(writes(table), min_size=1, max_size=3), max_size=3)
    rounds = draw(st.lists(commits, min_size=1, max_size=8))
    initial = draw(st.lists(writes(table), max_size=6))
    return table, before_images, query.format(t=table), ordered, offsets, initial, rounds


def _check(connection, table, query, ordered, offsets, initial, rounds) -> None:
    manager: SubscriptionManager = connection.instance.subscriptions
    writer, reader, asker = connection.session(), connection.session(), connection.session()
    for statement in initial:
        commit_or_roll_back(writer, [statement])
    text = f"SUBSCRIBE {query}"
    maintained_before = manager.stats()["maintained_answers"]
    reply = manager.ask_now(asker, text, None, offsets)
    subscription = reply.subscription
    grouped = "GROUP BY" in query or "count(" in query
    keyed_upserts = table in ("keyed", "pk")
    shown = reader.execute(f"SHOW CREATE TABLE {table}").rows
    before_images = "REPLICA IDENTITY FULL" in str(shown)  # the initial writes may alter it
    # Only a GROUP BY over a keyed table without before-images is run again (the log
    # does not say which row an upsert replaced); every other shape here is maintained.
    assert subscription.maintained == (not (grouped and keyed_upserts and not before_images))
    held = Counter(reply.rows)

    # With offsets the window's order is total: ties are broken by the table's key.
    fresh_query = query
    if offsets:
        fresh_query = query.replace(
            " LIMIT", ", sym, time LIMIT" if table == "keyed" else ", id LIMIT"
        )

    def compare(step: object) -> None:
        fresh = reader.execute(fresh_query).rows
        assert Counter(subscription.current.rows.values()) == Counter(fresh), step
        assert held == Counter(fresh), step
        if ordered and subscription.maintained:
            # A new client's snapshot comes from the maintained state: in the query's order.
            # (A kept answer whose rows only moved is not a new version: no client is told.)
            snapshot = manager.ask_now(asker, text, None, offsets)
            assert snapshot.rows == fresh, (step, snapshot.rows, fresh)

    compare("snapshot")
    for commits in rounds:
        for statements in commits:
            commit_or_roll_back(writer, statements)
        reply = manager.ask_now(asker, text, reply.id, offsets)
        assert reply.kind in ("rows", "none")
        if reply.kind == "rows":
            _apply(held, subscription, reply)
        compare(commits)
    if subscription.maintained:
        assert manager.stats()["maintained_answers"] > maintained_before


def _apply(held: Counter, subscription, reply) -> None:
    """A client's copy (a multiset of rows) after a `rows` answer, by the protocol's rule."""
    if subscription.whole_row:
        for removed in reply.removed_keys:
            held[tuple(removed)] -= 1
    else:
        names = [c.name for c in subscription.columns]
        key = [names.index(n) for n in subscription.key_columns]
        by_key = {tuple(r[i] for i in key): r for r in held.elements()}
        for removed in reply.removed_keys:
            del by_key[tuple(removed)]
        for row in reply.rows:
            by_key[tuple(row[i] for i in key)] = row
        held.clear()
        held.update(by_key.values())
        return
    held.update(reply.rows)
    for row in [r for r, n in held.items() if n <= 0]:
        del held[row]


def _run(folder, scenario) -> None:
    table, before_images, query, ordered, offsets, initial, rounds = scenario
    connection = refimpl.connect(folder / "data")
    try:
        create = TABLES[table] + (" REPLICA IDENTITY FULL" if before_images else "")
        connection.execute(create)
        _check(connection, table, query, ordered, offsets, initial, rounds)
    finally:
        connection.close()


@settings(OVER_FIXTURE, max_examples=150)
@given(scenario=scenarios())
def test_maintained_answer_equals_a_fresh_run(tmp_path_factory, scenario):
    _run(tmp_path_factory.mktemp("maintain"), scenario)


@pytest.mark.long
@settings(OVER_FIXTURE, max_examples=2000)
@given(scenario=scenarios())
def test_maintained_answer_equals_a_fresh_run_long(tmp_path_factory, scenario):
    _run(tmp_path_factory.mktemp("maintain"), scenario)


# -- which way each shape runs, and what a commit costs ---------------------------------


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    connection.execute(TABLES["rowid"])
    connection.execute(TABLES["pk"])
    connection.execute(TABLES["bag"] + " REPLICA IDENTITY FULL")
    yield connection
    connection.close()


@pytest.mark.parametrize(
    ("query", "maintained"),
    [
        ("SELECT sym, count(*) AS n, max(p) AS hi FROM rowid GROUP BY sym", True),
        ("SELECT date_trunc('minute', time) AS m, first(p), last(p) FROM rowid GROUP BY m", True),
        ("SELECT id, v FROM pk WHERE v > 3", True),
        ("SELECT count(*) AS n FROM bag", True),
        ("SELECT sym, count(*) AS n FROM pk GROUP BY sym", False),  # keyed, no before-images
        ("SELECT sym, v FROM rowid ORDER BY v LIMIT 3", True),
        ("SELECT sym, count(*) AS n FROM rowid GROUP BY sym ORDER BY n LIMIT 2", False),
        ("SELECT DISTINCT sym FROM rowid", False),
        ("SELECT count(DISTINCT sym) AS n FROM rowid", False),
        ("SELECT group_concat(sym) AS s FROM rowid", False),
        ("SELECT sym, v FROM rowid WHERE time > now()", False),
    ],
)
def test_which_queries_are_maintained(conn, query, maintained):
    manager = conn.instance.subscriptions
    reply = manager.ask_now(conn.session(), f"SUBSCRIBE {query}", None)
    assert reply.subscription.maintained is maintained


def test_float_sums_add_in_the_order_a_fresh_run_reads(conn):
    # 0.1 + 1e16 is 1e16: a late row (earliest time) must be added first, as a fresh run
    # reads it, not last, as it arrived.
    manager = conn.instance.subscriptions
    session = conn.session()
    text = "SUBSCRIBE SELECT sum(p) AS s, avg(p) AS a FROM rowid"
    reply = manager.ask_now(session, text, None)
    for time, price in [("02", 1e16), ("03", -1e16), ("01", 0.1)]:
        conn.execute(f"INSERT INTO rowid VALUES ('2026-01-01T00:00:{time}Z', 'A', 1, {price})")
        reply = manager.ask_now(session, text, reply.id)
    fresh = conn.execute(text.removeprefix("SUBSCRIBE ")).rows
    assert fresh == [(0.0, 0.0)]
    assert list(reply.subscription.current.rows.values()) == fresh


def test_inserts_are_applied_without_reading_the_table(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    text = (
        "SUBSCRIBE SELECT date_trunc('minute', time) AS m, first(p) AS open, max(p) AS high,"
        " min(p) AS low, last(p) AS close FROM rowid WHERE sym = 'A' GROUP BY m ORDER BY m"
    )
    reply = manager.ask_now(session, text, None)
    reads = manager.stats()["maintainer_table_reads"]
    for second in range(30):
        conn.execute(
            f"INSERT INTO rowid VALUES ('2026-01-01T00:{second:02d}:30Z', 'A', 1, {second})"
        )
        reply = manager.ask_now(session, text, reply.id)
        assert reply.kind == "rows"
        assert reply.rows == [(1767225600000000 + second * 60_000_000, *[float(second)] * 4)]
    assert manager.stats()["maintainer_table_reads"] == reads  # every trade applied
    # An update of a table without before-images: the row it changed is not in the log,
    # so the maintainer reads the table again, once.
    conn.execute("UPDATE rowid SET p = 100 WHERE p = 3")
    reply = manager.ask_now(session, text, reply.id)
    assert reply.rows == [(1767225780000000, 100.0, 100.0, 100.0, 100.0)]
    assert manager.stats()["maintainer_table_reads"] == reads + 1


def test_updates_and_deletes_with_before_images_are_applied(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    text = "SUBSCRIBE SELECT sym, count(*) AS n, min(v) AS lo, max(v) AS hi FROM bag GROUP BY sym"
    conn.execute(
        "INSERT INTO bag VALUES ('2026-01-01T00:00:00Z', 'A', 1, 1),"
        " ('2026-01-01T00:00:01Z', 'A', 5, 1)"
    )
    reply = manager.ask_now(session, text, None)
    assert sorted(reply.rows) == [("A", 2, 1, 5)]
    reads = manager.stats()["maintainer_table_reads"]
    conn.execute("DELETE FROM bag WHERE v = 5")
    reply = manager.ask_now(session, text, reply.id)
    assert reply.rows == [("A", 1, 1, 1)]
    conn.execute("UPDATE bag SET sym = 'B' WHERE v = 1")
    reply = manager.ask_now(session, text, reply.id)
    assert (reply.rows, reply.removed_keys) == ([("B", 1, 1, 1)], [("A",)])
    assert manager.stats()["maintainer_table_reads"] == reads


def test_a_state_pushed_out_is_read_again_when_asked(conn):
    manager = conn.instance.subscriptions
    manager._maintainers = Maintainers(size=1)  # room for one query's state
    session = conn.session()
    first = "SUBSCRIBE SELECT sym, count(*) AS n FROM rowid GROUP BY sym"
    second = "SUBSCRIBE SELECT sym, max(v) AS hi FROM rowid GROUP BY sym"
    conn.execute("INSERT INTO rowid VALUES ('2026-01-01T00:00:00Z', 'A', 1, 1)")
    one, two = manager.ask_now(session, first, None), manager.ask_now(session, second, None)
    reads = manager.stats()["maintainer_table_reads"]
    conn.execute("INSERT INTO rowid VALUES ('2026-01-01T00:00:01Z', 'A', 5, 1)")
    assert manager.ask_now(session, second, two.id).rows == [("A", 5)]
    assert manager.stats()["maintainer_table_reads"] == reads  # kept: applied
    assert manager.ask_now(session, first, one.id).rows == [("A", 2)]
    assert manager.stats()["maintainer_table_reads"] == reads + 1  # pushed out: read again
    assert one.subscription.maintained

"""Ordered top-N live queries (spec: subscribe, offsets), driven through SubscriptionManager.

The central property: a client that keeps the snapshot as a list and applies every answer's
moves, in order, always holds exactly what a fresh run of the query answers, in its order
(the ORDER BY, then the table's key), whatever the commits, the window's size and the order.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.features.top_n import Move, moves, top_plan
from refimpl.errors import BadRequest
from refimpl.sql import ast
from tests.engine.features.live_scenarios import commit_or_roll_back, on_fresh_database, rounds
from tests.hypothesis_settings import OVER_FIXTURE
from tests.parsed import statement as parsed_statement

# Tables of one shape of rows (an integer identity, a group, a value, a time and a symbol),
# kept in different orders: by key, by a sort key, by time in day partitions, and by
# symbol partitions; each with the key its ties are broken by.
TABLES = {
    "pk": ("CREATE TABLE pk (id INT PRIMARY KEY, g INT, v INT, time TIMESTAMP, sym SYMBOL)", "id"),
    "sorted": (
        "CREATE TABLE sorted (id INT PRIMARY KEY, g INT, v INT, time TIMESTAMP,"
        " sym SYMBOL) SORT BY (g)",
        "id",
    ),
    "days": (
        "CREATE TABLE days (id INT, g INT, v INT, time TIMESTAMP, sym SYMBOL)"
        " TIMESERIES(time) PARTITION BY DAY DEDUP KEY (time, id)",
        "time, id",
    ),
    "symbols": (
        "CREATE TABLE symbols (id INT, g INT, v INT, time TIMESTAMP, sym SYMBOL)"
        " TIMESERIES(time) PARTITION BY DAY, SYMBOL(sym) SORT BY (sym, time)"
        " DEDUP KEY (sym, time, id)",
        "sym, time, id",
    ),
}
ORDERS = {
    "pk": ["id", "v", "v DESC", "g, v", "g", "v NULLS FIRST", "time"],
    "sorted": ["g", "g, id", "v", "g DESC", "id"],
    "days": ["time", "time, id", "v", "id", "time DESC"],
    "symbols": ["time", "sym, time", "v DESC", "id"],
}
WHERES = ["", "v > 2", "g = 1", "v IS NOT NULL"]
SYMBOLS = ["A", "B"]


def _time(day: int, minute: int) -> str:
    return f"2026-01-0{day + 1}T00:{minute:02d}:00Z"


class Client:
    """An ordered list kept only from the answers: a snapshot, then moves."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.rows: list[tuple] = []

    def apply(self, reply) -> None:
        if reply.kind == "snapshot":
            self.rows = list(reply.rows)
        elif reply.kind == "rows":
            assert reply.moves is not None
            for move in reply.moves:
                if move.old_offset is not None:
                    del self.rows[move.old_offset]
                if move.new_offset is not None:
                    assert move.new_offset <= len(self.rows)
                    self.rows.insert(move.new_offset, move.row)
        else:
            assert reply.kind == "none" and reply.moves is None
        self.id = reply.id


@st.composite
def queries(draw, table: str) -> tuple[str, str]:
    """(SUBSCRIBE text, the same query with its ties broken in SQL)."""
    order = draw(st.sampled_from(ORDERS[table]))
    where = draw(st.sampled_from(WHERES))
    if table == "symbols" and draw(st.booleans()):
        where = "sym = 'A'" + (f" AND {where}" if where else "")
    n = draw(st.integers(1, 6))
    items = draw(st.sampled_from(["id, v", "*", "v, g, time", "id, sym, time, v"]))
    text = f"SELECT {items} FROM {table}" + (f" WHERE {where}" if where else "")
    key = TABLES[table][1]
    return (
        f"SUBSCRIBE {text} ORDER BY {order} LIMIT {n}",
        f"{text} ORDER BY {order}, {key} LIMIT {n}",
    )


@st.composite
def writes(draw, table: str) -> str:
    ident = draw(st.integers(0, 9))
    g = draw(st.integers(0, 2))
    value = draw(st.one_of(st.none(), st.integers(0, 6)))
    v = "NULL" if value is None else str(value)
    day, minute = draw(st.integers(0, 2)), draw(st.integers(0, 3))
    sym = draw(st.sampled_from(SYMBOLS))
    kind = draw(
        st.sampled_from(
            [
                "insert",
                "insert",
                "insert",
                "set_v",
                "set_g",
                "move",
                "delete",
                "delete_many",
                "truncate",
            ]
        )
    )
    if kind == "insert":
        # On a primary key an existing id clashes (the transaction rolls back); on a DEDUP
        # KEY the row replaces the one of the same key.
        return f"INSERT INTO {table} VALUES ({ident}, {g}, {v}, '{_time(day, minute)}', '{sym}')"
    if kind == "set_v":
        return f"UPDATE {table} SET v = {v} WHERE id = {ident}"
    if kind == "set_g":
        return f"UPDATE {table} SET g = {g} WHERE v > {draw(st.integers(0, 6))}"
    if kind == "move":
        return f"UPDATE {table} SET time = '{_time(day, minute)}' WHERE id = {ident}"
    if kind == "delete":
        return f"DELETE FROM {table} WHERE id = {ident}"
    if kind == "delete_many":
        return f"DELETE FROM {table} WHERE g = {g}"
    return f"TRUNCATE {table}"


@st.composite
def scenarios(draw):
    table = draw(st.sampled_from(sorted(TABLES)))
    query = draw(queries(table))
    initial = draw(st.lists(writes(table), max_size=8))
    return table, query, initial, draw(rounds(writes(table), ["ask", "ask", "ask", "lose"], 8))


def check_scenario(connection, query, initial, commit_rounds) -> None:
    subscribe, fresh_text = query
    manager = connection.instance.subscriptions
    writer, reader, asker = connection.session(), connection.session(), connection.session()
    for statement in initial:
        commit_or_roll_back(writer, [statement])

    def fresh() -> list[tuple]:
        return [tuple(row) for row in reader.execute(fresh_text).rows]

    client = Client()
    client.apply(manager.ask_now(asker, subscribe, None, offsets=True))
    assert client.rows == fresh(), "snapshot"
    for commits, how in commit_rounds:
        for statements in commits:
            commit_or_roll_back(writer, statements)
        if how == "lose":
            manager.ask_now(asker, subscribe, client.id, offsets=True)  # never arrives
        client.apply(manager.ask_now(asker, subscribe, client.id, offsets=True))
        assert client.rows == fresh(), (commits, how)


@settings(OVER_FIXTURE, max_examples=150)
@given(scenario=scenarios())
def test_moves_applied_to_the_list_equal_a_fresh_run(tmp_path_factory, scenario):
    table, query, initial, commit_rounds = scenario
    on_fresh_database(
        tmp_path_factory.mktemp("top"),
        TABLES[table][0],
        lambda conn: check_scenario(conn, query, initial, commit_rounds),
    )


@settings(deadline=None)
@given(
    old=st.lists(st.integers(0, 12), unique=True, max_size=10),
    new=st.lists(
        st.tuples(st.integers(0, 12), st.integers(0, 1)),
        max_size=10,
        unique_by=lambda pair: pair[0],
    ),
)
def test_moves_turn_one_list_into_another(old, new):
    before = {ident: (ident, 0) for ident in old}
    after = {ident: (ident, value) for ident, value in new}
    held = list(before.values())
    for move in moves(before, after):
        if move.old_offset is not None:
            del held[move.old_offset]
        if move.new_offset is not None:
            held.insert(move.new_offset, move.row)
    assert held == list(after.values())


def test_rows_that_keep_their_order_do_not_move():
    before = {k: (k,) for k in "abcd"}
    after = {k: (k,) for k in "bcda"}
    assert moves(before, after) == [Move(0, 3, ("a",))]
    assert moves(after, after) == []


@pytest.fixture
def conn(tmp_path):
    connection = refimpl.connect(tmp_path / "data")
    for create, _ in TABLES.values():
        connection.execute(create)
    yield connection
    connection.close()


@pytest.mark.parametrize(
    ("table", "query", "in_order"),
    [
        ("pk", "SELECT id, v FROM pk ORDER BY id LIMIT 3", True),
        ("pk", "SELECT id, v FROM pk WHERE v > 1 ORDER BY id LIMIT 3", True),
        ("pk", "SELECT id, v FROM pk ORDER BY v LIMIT 3", False),
        ("pk", "SELECT id, v FROM pk ORDER BY id DESC LIMIT 3", False),
        ("sorted", "SELECT * FROM sorted ORDER BY g LIMIT 3", True),
        ("sorted", "SELECT * FROM sorted ORDER BY g, id LIMIT 3", True),
        ("sorted", "SELECT * FROM sorted ORDER BY id LIMIT 3", False),
        ("days", "SELECT * FROM days ORDER BY time LIMIT 3", True),
        ("days", "SELECT * FROM days ORDER BY id LIMIT 3", False),
        ("symbols", "SELECT * FROM symbols WHERE sym = 'A' ORDER BY time LIMIT 3", True),
        ("symbols", "SELECT * FROM symbols ORDER BY time LIMIT 3", False),
    ],
)
def test_orders_the_table_keeps_are_read_in_table_order(conn, table, query, in_order):
    schema = conn.instance.database("demo").tables[table].schema
    select = parsed_statement(query, ast.Select)
    assert top_plan(select, schema).in_table_order is in_order


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("SUBSCRIBE SELECT id FROM pk", "no ORDER BY and no LIMIT"),
        ("SUBSCRIBE SELECT id FROM pk ORDER BY id", "no LIMIT"),
        ("SUBSCRIBE SELECT id FROM pk LIMIT 3", "no ORDER BY"),
        ("SUBSCRIBE SELECT g, count(*) AS n FROM pk GROUP BY g ORDER BY g LIMIT 3", "GROUP BY"),
    ],
)
def test_offsets_without_an_ordered_limited_query_is_refused(conn, query, says):
    with pytest.raises(BadRequest, match="offsets=true needs") as refused:
        conn.instance.subscriptions.ask_now(conn.session(), query, None, offsets=True)
    assert says in str(refused.value)


def test_offsets_need_a_key_to_break_ties(conn):
    conn.execute("CREATE TABLE loose (v INT)")
    with pytest.raises(BadRequest, match="table 'loose' has no PRIMARY KEY or DEDUP KEY"):
        conn.instance.subscriptions.ask_now(
            conn.session(),
            "SUBSCRIBE SELECT v FROM loose ORDER BY v LIMIT 2",
            None,
            offsets=True,
        )


def test_an_id_asked_without_offsets_gets_a_snapshot_of_its_own(conn):
    manager = conn.instance.subscriptions
    session = conn.session()
    query = "SUBSCRIBE SELECT id, v FROM pk ORDER BY id LIMIT 2"
    first = manager.ask_now(session, query, None, offsets=True)
    again = manager.ask_now(session, query, first.id)
    assert again.kind == "snapshot" and again.moves is None


def test_a_row_moved_by_a_column_outside_the_select_list_is_a_move(conn):
    """Found by the property: the rows keep their values, only their order changes."""
    manager = conn.instance.subscriptions
    session = conn.session()
    conn.execute(
        "INSERT INTO sorted VALUES (0, 1, NULL, '2026-01-01T00:00:00Z', 'A'),"
        " (1, 0, 1, '2026-01-01T00:00:00Z', 'A')"
    )
    query = "SUBSCRIBE SELECT id, v FROM sorted ORDER BY g LIMIT 2"
    snapshot = manager.ask_now(session, query, None, offsets=True)
    assert snapshot.rows == [(1, 1), (0, None)]
    conn.execute("UPDATE sorted SET g = 1 WHERE v > 0")  # both g = 1 now: id breaks the tie
    reply = manager.ask_now(session, query, snapshot.id, offsets=True)
    assert (reply.kind, reply.rows, reply.removed_keys) == ("rows", [], [])
    listed = list(snapshot.rows)
    for move in reply.moves:
        if move.old_offset is not None:
            del listed[move.old_offset]
        if move.new_offset is not None:
            listed.insert(move.new_offset, move.row)
    assert listed == [(0, None), (1, 1)]

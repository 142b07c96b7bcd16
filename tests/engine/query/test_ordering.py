"""ORDER BY ... LIMIT n keeps only n rows at a time (`first_rows`), and answers exactly what a
sort of every row cut after n answers: the same rows in the same order, ties in the order
the rows came in, NULLs where each item asks, for any mix of directions and value types."""

from __future__ import annotations

import itertools
import operator
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.query import ordering
from refimpl.engine.query.ordering import first_rows, sort_rows
from refimpl.errors import KdbError
from refimpl.sql import ast

# Few distinct values, so that ties and NULLs are common; one type per column, as in SQL.
INTS = st.one_of(st.none(), st.integers(-3, 3))
FLOATS = st.one_of(st.none(), st.sampled_from([-1.5, -0.0, 0.0, 0.5, 2.0]))
TEXTS = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "é"]))
BOOLS = st.one_of(st.none(), st.booleans())
ROWS = st.lists(st.tuples(INTS, FLOATS, TEXTS, BOOLS, st.integers(0, 10**6)), max_size=120)
ITEMS = st.lists(
    st.tuples(
        st.integers(0, 4),  # the column
        st.booleans(),  # DESC
        st.sampled_from([None, True, False]),  # NULLS FIRST / LAST / as the direction says
    ),
    min_size=1,
    max_size=4,
)


def _order_fns(
    items: list[tuple[int, bool, bool | None]], functions: bool = True
) -> list[tuple[Callable, ast.OrderItem]]:
    """The items' value getters: a column's (read in C), or with `functions` for half the
    columns a function's, as a compiled expression is (such items are computed for every
    row, so they keep the rows from being set aside a chunk at a time)."""
    fns: list[tuple[Callable, ast.OrderItem]] = []
    for column, descending, nulls_first in items:
        order = ast.OrderItem(ast.ColumnRef(f"c{column}"), descending, nulls_first)
        getter = operator.itemgetter(column)
        fns.append(
            (getter if column % 2 or not functions else (lambda row, c=column: row[c]), order)
        )
    return fns


@settings(max_examples=400, deadline=None)
@given(rows=ROWS, items=ITEMS, count=st.integers(0, 40))
def test_first_rows_are_a_full_sort_cut(
    rows: list[tuple], items: list[tuple[int, bool, bool | None]], count: int
) -> None:
    order_fns = _order_fns(items)
    expected = sort_rows(list(rows), order_fns)[:count]
    got = first_rows(list(rows), order_fns, count)
    # Rows are compared by identity too: equal rows must come in their first order.
    assert got == expected
    assert [id(row) for row in got] == [id(row) for row in expected]


# Values enough for rows of later chunks to enter the first ones, and ties still common.
COLUMN_VALUES = [
    [None, *range(-40, 40)],
    [None, *(n / 4 for n in range(-30, 30))],
    [None, *("".join(p) for n in range(4) for p in itertools.product("ab", repeat=n))],
    [None, False, True],
]


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    size=st.integers(1000, 5000),
    items=ITEMS,
    count=st.integers(1, 60),
    nulls=st.booleans(),
)
def test_first_rows_of_many_chunks_are_a_full_sort_cut(
    seed: int, size: int, items: list[tuple[int, bool, bool | None]], count: int, nulls: bool
) -> None:
    """Thousands of rows: the rows set aside a chunk at a time on their first value are
    exactly those a full sort puts after the first `count`."""
    rng = random.Random(seed)
    pools = [values if nulls else values[1:] for values in COLUMN_VALUES]
    rows = [(*(rng.choice(pool) for pool in pools), rng.randrange(10**6)) for _ in range(size)]
    order_fns = _order_fns(items, functions=False)
    expected = sort_rows(list(rows), order_fns)[:count]
    got = first_rows(list(rows), order_fns, count)
    assert [id(row) for row in got] == [id(row) for row in expected]


def test_a_long_table_takes_the_heap_and_counts_each_row_once() -> None:
    """Far more rows than kept: the heap runs (not the sort), and each ORDER BY value is
    computed once a row, so ORDER BY random() keeps one value per row."""
    rows = [(n % 97, n) for n in range(5000)]
    calls = 0

    def counted(row: tuple) -> Any:
        nonlocal calls
        calls += 1
        return row[0]

    order = ast.OrderItem(ast.ColumnRef("a"), True, None)
    tie = ast.OrderItem(ast.ColumnRef("b"), False, None)
    got = first_rows(list(rows), [(counted, order), (operator.itemgetter(1), tie)], 7)
    assert got == sorted(rows, key=lambda r: (-r[0], r[1]))[:7]
    assert calls == len(rows)


def test_a_losing_row_still_raises_its_error() -> None:
    """A row past the kept ones on the first item still has its other items computed, as a
    sort computes them: an error in one of them is not skipped."""
    rows = [(n, n % 50) for n in range(1000)]

    def inverse(row: tuple) -> float:
        return 1 / row[1]  # ZeroDivisionError at every 50th row

    first = ast.OrderItem(ast.ColumnRef("a"), False, None)
    second = ast.OrderItem(ast.ColumnRef("b"), False, None)
    with pytest.raises(ZeroDivisionError):
        first_rows(list(rows[1:]), [(operator.itemgetter(0), first), (inverse, second)], 3)


# -- through SQL ---------------------------------------------------------------------------

QUERIES = [
    "SELECT id, g, v FROM t ORDER BY g DESC, v LIMIT {n} OFFSET {o}",
    "SELECT * FROM t ORDER BY v DESC NULLS LAST, g LIMIT {n}",
    "SELECT g AS name, id FROM t ORDER BY name, id DESC LIMIT {n} OFFSET {o}",
    "SELECT id, v * 2 AS w FROM t ORDER BY w DESC, g NULLS FIRST LIMIT {n} OFFSET {o}",
    "SELECT v, g FROM t WHERE id % 3 <> 1 ORDER BY 2, 1 DESC LIMIT {n}",
    "SELECT g, count(*) AS c FROM t GROUP BY g ORDER BY c DESC, g LIMIT {n} OFFSET {o}",
    "SELECT id FROM t ORDER BY length(g) DESC, id LIMIT {n}",
]
TABLE_ROWS = st.lists(
    st.tuples(
        st.one_of(st.none(), st.sampled_from(["x", "xy", "y", "z", "Z"])),
        st.one_of(st.none(), st.integers(-4, 4), st.sampled_from([0.5, -2.5])),
    ),
    max_size=150,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=TABLE_ROWS, n=st.integers(0, 30), o=st.integers(0, 5))
def test_limit_answers_the_first_rows_of_the_whole_order(
    rows: list[tuple[str | None, float | None]], n: int, o: int
) -> None:
    """Each query with LIMIT answers the rows of the same query without it, cut after
    OFFSET + LIMIT rows (every ORDER BY here is total but for rows equal in all it reads)."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(Path(folder))
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g STRING, v DOUBLE)")
        for ident, (g, v) in enumerate(rows):
            conn.execute("INSERT INTO t VALUES (?, ?, ?)", [ident, g, v])
        for query in QUERIES:
            whole = conn.execute(query.format(n=10**9, o=0).replace(" OFFSET 0", "")).rows
            cut = conn.execute(query.format(n=n, o=o)).rows
            offset = o if "{o}" in query else 0
            assert cut == whole[offset : offset + n], query


def test_limit_still_raises_an_error_of_a_row_it_does_not_keep() -> None:
    """ORDER BY a, CAST(b AS INT) LIMIT 1: a row that cannot be kept (its a is too large)
    still has its cast computed, and a text that is no number there is the statement's
    error, as without LIMIT."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(Path(folder))
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, a INT, b STRING)")
        values = ", ".join(f"({i}, {i}, '{i if i != 700 else 'x'}')" for i in range(1, 800))
        conn.execute("INSERT INTO t VALUES " + values)
        with pytest.raises(KdbError, match="cannot cast 'x' to INT"):
            conn.execute("SELECT id FROM t ORDER BY a, CAST(b AS INT) LIMIT 1")
        assert conn.execute(
            "SELECT id FROM t WHERE b <> 'x' ORDER BY a, CAST(b AS INT) LIMIT 1"
        ).rows == [(1,)]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), items=ITEMS, nulls=st.booleans())
def test_a_long_sort_in_runs_is_the_one_sort(
    seed: int, items: list[tuple[int, bool, bool | None]], nulls: bool
) -> None:
    """Over SORT_RUN rows, sort_rows sorts runs and merges them (letting other threads in):
    the same rows in the same order as one stable sort, equal rows in their first order."""
    rng = random.Random(seed)
    pools = [values if nulls else values[1:] for values in COLUMN_VALUES]
    size = 2 * ordering.SORT_RUN + rng.randrange(ordering.SORT_RUN)
    rows = [(*(rng.choice(pool) for pool in pools), rng.randrange(10**6)) for _ in range(size)]
    order_fns = _order_fns(items, functions=False)
    expected = list(rows)
    for fn, order in reversed(order_fns):
        rank = ordering._null_rank(order)

        def key(row: tuple, fn: Callable = fn, rank: bool = rank) -> tuple:
            value = fn(row)
            return (not rank, 0) if value is None else (rank, value)

        expected.sort(key=key, reverse=order.descending)
    got = sort_rows(list(rows), order_fns)
    assert [id(row) for row in got] == [id(row) for row in expected]

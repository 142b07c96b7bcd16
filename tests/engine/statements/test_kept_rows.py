"""A one-row INSERT's row made by code made for its shape (`kept_rows.kept_row`, what a
`PreparedInsert` keeps per schema) is the row the general steps make: for any values, and
for a handler kept across any schema changes, the answers and the rows written are those of
the general INSERT (`executor`'s) on a twin table."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from refimpl.engine.instance import Instance
from refimpl.engine.statements import executor
from refimpl.engine.statements.kept_rows import Check, kept_row
from refimpl.engine.statements.prepared_insert import PreparedInsert
from refimpl.engine.statements.prepared_runs import prepared_handler
from refimpl.engine.storage import values
from refimpl.errors import KdbError
from refimpl.sql.parser import parse_cached

TYPES = ["INT", "BIGINT", "DOUBLE", "STRING", "SYMBOL", "BOOLEAN", "TIMESTAMP"]
# Values of every Python type a client's parameter may take, at and past the types' edges.
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([values.INT_MIN, values.INT_MAX, values.BIGINT_MIN, values.BIGINT_MAX]).map(
        lambda edge: edge + (-1 if edge < 0 else 1)  # just past the edge
    ),
    st.sampled_from([values.INT_MIN, values.INT_MAX, values.BIGINT_MIN, values.BIGINT_MAX]),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.floats(),  # inf and NaN too
    st.text(max_size=4),
)
CHECKS: st.SearchStrategy[Check] = st.sampled_from(
    [
        (int, values.INT_MIN, values.INT_MAX),
        (int, values.BIGINT_MIN, values.BIGINT_MAX),
        (float, -1.5, 1.5),
        (str, None, None),
    ]
)


@given(st.data())
def test_a_kept_row_is_the_values_placed_when_each_is_kept(data: st.DataObject) -> None:
    checks = data.draw(st.lists(CHECKS, min_size=1, max_size=6))
    width = data.draw(st.integers(min_value=len(checks), max_value=len(checks) + 3))
    positions = data.draw(st.permutations(range(width)))[: len(checks)]
    given_values = data.draw(st.lists(VALUES, min_size=len(checks), max_size=len(checks)))
    made = kept_row(tuple(checks), tuple(positions), width)(given_values)
    each_kept = all(
        type(v) is kind and (low is None or low <= v <= high)
        for v, (kind, low, high) in zip(given_values, checks, strict=True)
    )
    if not each_kept:
        assert made is None
        return
    expected: list[Any] = [None] * width
    for position, value in zip(positions, given_values, strict=True):
        expected[position] = value
    assert made == tuple(expected)


def _outcome(handler: Any, session: Any, text: str, params: tuple[Any, ...]) -> object:
    statement = parse_cached(text).statements[0]
    try:
        result = handler(session, statement, text, params)
    except KdbError as error:
        return type(error).__name__, error.message.replace("general", "fast")
    return result.message, result.count


# A schema change between runs, made to both tables alike.
CHANGES = st.one_of(
    st.tuples(st.just("ADD"), st.sampled_from(TYPES)),
    st.tuples(st.just("DROP"), st.integers(min_value=0, max_value=4)),
)


@settings(max_examples=60, deadline=None)
@example(  # each value just past its column's range, then within it
    types=["BIGINT", "INT", "DOUBLE"],
    keyed=True,
    named=True,
    steps=[
        ("ROW", [2**63, 1, 1.0, None]),
        ("ROW", [1, 2**31, 1.0, None]),
        ("ROW", [2, 1, float("inf"), None]),
        ("ROW", [3, -(2**31), -1e308, None]),
        ("ADD", "STRING"),
        ("ROW", [4, 2, 0.5, None]),
    ],
)
@given(
    types=st.lists(st.sampled_from(TYPES), min_size=1, max_size=4),
    keyed=st.booleans(),
    named=st.booleans(),
    steps=st.lists(
        st.one_of(st.tuples(st.just("ROW"), st.lists(VALUES, min_size=4, max_size=4)), CHANGES),
        max_size=8,
    ),
)
def test_a_kept_handler_writes_as_the_general_insert_across_schema_changes(
    types: list[str],
    keyed: bool,
    named: bool,
    steps: list[tuple[str, Any]],
) -> None:
    columns = [f"c{i} {kind}" for i, kind in enumerate(types)]
    key = ", PRIMARY KEY (c0)" if keyed else ""  # NOT NULL: only a key's columns are
    names = [f"c{i}" for i in range(len(types))]
    listed = f" ({', '.join(names)})" if named else ""
    marks = ", ".join("?" for _ in types)
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        try:
            session = instance.session()
            for table in ("fast", "general"):
                session.execute(f"CREATE TABLE {table} ({', '.join(columns)}{key})")
            texts = {t: f"INSERT INTO {t}{listed} VALUES ({marks})" for t in ("fast", "general")}
            fast = prepared_handler(parse_cached(texts["fast"]).statements[0])
            assert isinstance(fast, PreparedInsert)
            general = executor.handler_of(parse_cached(texts["general"]).statements[0])
            added = len(types)
            for step, what in steps:
                if step == "ROW":
                    params = tuple(what[: len(types)])
                    assert _outcome(fast, session, texts["fast"], params) == _outcome(
                        general, session, texts["general"], params
                    )
                    continue
                if step == "ADD":
                    change = f"ADD COLUMN n{added} {what}"
                    added += 1
                else:
                    change = f"DROP COLUMN c{what}"
                answers = []
                for table in ("fast", "general"):
                    try:
                        session.execute(f"ALTER TABLE {table} {change}")
                        answers.append("changed")
                    except KdbError as error:
                        answers.append(type(error).__name__)
                assert answers[0] == answers[1]
            rows = [sorted(session.execute(f"SELECT * FROM {t}").rows, key=repr) for t in texts]
            assert rows[0] == rows[1]
        finally:
            instance.close()

"""The unrolled DataRow writer sends what the column loop sends, byte for byte; its code is
made once a shape and capped by column count."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.result import Column
from refimpl.pgwire import messages as m
from refimpl.pgwire import row_writers
from refimpl.pgwire import types as t
from refimpl.pgwire.row_writers import rows_writer

TYPES = ["BIGINT", "INT", "DOUBLE", "STRING", "SYMBOL", "TIMESTAMP", "BOOLEAN", "OID"]
VALUES = {
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "INT": st.integers(-(2**31), 2**31 - 1),
    "DOUBLE": st.floats(allow_nan=True, allow_infinity=True) | st.integers(-(2**53), 2**53),
    "STRING": st.text(max_size=20),
    "SYMBOL": st.text(max_size=20),
    "OID": st.integers(0, 2**32 - 1),
    "TIMESTAMP": st.integers(t.TIMESTAMP_MIN, t.TIMESTAMP_MAX),
    "BOOLEAN": st.booleans(),
}


@st.composite
def results(
    draw: st.DrawFn, min_columns: int = 0, max_columns: int = 6
) -> tuple[list[str], list[int], list[tuple[object, ...]]]:
    columns = draw(st.lists(st.sampled_from(TYPES), min_size=min_columns, max_size=max_columns))
    formats = draw(st.lists(st.sampled_from([0, 1]), min_size=len(columns), max_size=len(columns)))
    row = st.tuples(*(st.none() | VALUES[c] for c in columns))
    return columns, formats, draw(st.lists(row, max_size=8))


# Under a loaded machine drawing the rows is slow: that says nothing of the writer.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results() | results(30, 40))  # either side of the columns unrolled at most
def test_the_writer_sends_what_the_loop_sends(
    result: tuple[list[str], list[int], list[tuple[object, ...]]],
) -> None:
    columns, formats, rows = result
    encoders = tuple(t.encoders(columns, formats))
    expected = m.DataRows(rows, encoders).encode()
    assert rows_writer(encoders)(rows) == expected
    # The encoders written out in its lines (what a result's shape uses) send the same.
    inline = [t.INLINE_TEXT.get(e) for e in encoders]
    assert rows_writer(encoders, inline)(rows) == expected
    assert t.RowShape.of([Column("c", c) for c in columns], formats).write(rows) == expected


def test_a_row_of_another_length_is_refused() -> None:
    encoders = tuple(t.encoders(["INT", "INT"], [0, 0]))
    try:
        rows_writer(encoders)([(1, 2, 3)])
    except ValueError:
        return
    raise AssertionError("a row of three values was written for two columns")


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The source texts the row writers' module compiles while the test runs."""
    sources: list[str] = []

    def counting(source: str, *args: Any, **kwargs: Any) -> Any:
        sources.append(source)
        return compile(source, *args, **kwargs)

    monkeypatch.setattr(row_writers, "compile", counting, raising=False)
    yield sources


def _shape(types: list[str]) -> t.RowShape:
    return t.RowShape.of([Column(f"c{n}", c) for n, c in enumerate(types)], [0] * len(types))


def test_a_shape_made_again_compiles_nothing(compiled: list[str]) -> None:
    # A simple query's result makes its shape at every run: two queries in turn, 200 runs.
    shapes = [
        _shape(["INT", "DOUBLE", "STRING"] if n % 2 else ["BIGINT", "BOOLEAN"]) for n in range(200)
    ]
    assert len(compiled) <= 2
    rows = [(1, 2.5, "a"), (None, 3.0, "b")]
    assert shapes[199].write(rows) == m.DataRows(rows, shapes[199].encoders).encode()
    assert shapes[0].write([(7, False)]) == m.DataRows([(7, False)], shapes[0].encoders).encode()


def test_a_result_of_thousands_of_columns_compiles_no_code_for_them(compiled: list[str]) -> None:
    types = [TYPES[n % len(TYPES)] for n in range(5000)]
    shape = _shape(types)
    # No more code than a shape of the most columns unrolled: 32 columns' lines.
    assert sum(len(source) for source in compiled) < 20_000
    values = {"STRING": "s", "SYMBOL": "y", "BOOLEAN": True, "DOUBLE": 0.5}
    row = tuple(None if n % 7 == 0 else values.get(c, n) for n, c in enumerate(types))
    assert shape.write([row, row]) == m.DataRows([row, row], shape.encoders).encode()

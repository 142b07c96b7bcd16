"""The unrolled DataRow writer sends what the column loop sends, byte for byte."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.result import Column
from refimpl.pgwire import messages as m
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
def results(draw: st.DrawFn) -> tuple[list[str], list[int], list[tuple[object, ...]]]:
    columns = draw(st.lists(st.sampled_from(TYPES), min_size=0, max_size=6))
    formats = draw(st.lists(st.sampled_from([0, 1]), min_size=len(columns), max_size=len(columns)))
    row = st.tuples(*(st.none() | VALUES[c] for c in columns))
    return columns, formats, draw(st.lists(row, max_size=8))


# Under a loaded machine drawing the rows is slow: that says nothing of the writer.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(results())
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

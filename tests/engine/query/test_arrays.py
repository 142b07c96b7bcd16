"""Subscripts of an array's text (from 1) and of a vector's text (from 0, as PostgreSQL
subscripts an int2vector such as pg_index.indkey)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.engine.query.arrays import subscripted_items
from refimpl.errors import InvalidValue

NUMBERS = st.lists(st.integers(-(2**15), 2**15 - 1), max_size=8)


@given(numbers=NUMBERS)
def test_an_array_counts_from_one_and_a_vector_from_zero(numbers):
    as_array = subscripted_items("{" + ",".join(map(str, numbers)) + "}")
    as_vector = subscripted_items(" ".join(map(str, numbers)))
    assert as_array == ([str(n) for n in numbers], 1)
    assert as_vector == ([str(n) for n in numbers], 0)


def test_subscripts_read_elements_and_null_past_either_end(session):
    rows = session.execute(
        "SELECT '2 1'[0], '2 1'[1], '2 1'[2], '2 1'[-1], '{2,1}'[1], '{2,1}'[0], ''[0]"
    ).rows
    assert rows == [(2, 1, None, None, 2, None, None)]
    with pytest.raises(InvalidValue):
        session.execute("SELECT 'a b'[0]")

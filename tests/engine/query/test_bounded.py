"""`relations.bounded`: every row in order, each taken from its source only when asked for,
and the statement stopped once past its deadline (looked at every few thousand rows)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from refimpl.engine.query.relations import bounded
from refimpl.errors import StatementTimeout


def test_every_row_in_order() -> None:
    rows = list(range(10_000))
    assert list(bounded(rows, time.monotonic() + 60)) == rows
    assert list(bounded(rows, None)) == rows
    assert list(bounded([], time.monotonic() + 60)) == []


def test_rows_are_taken_only_when_asked_for() -> None:
    taken = 0

    def source() -> Iterator[int]:
        nonlocal taken
        for n in itertools.count():
            taken += 1
            yield n

    rows = bounded(source(), time.monotonic() + 60)
    assert list(itertools.islice(rows, 5000)) == list(range(5000))
    assert taken == 5000  # a LIMIT's early stop reads nothing more


def test_a_statement_past_its_deadline_stops() -> None:
    got: list[int] = []
    with pytest.raises(StatementTimeout):
        for row in bounded(itertools.count(), time.monotonic() - 1):
            got.append(row)
    assert 0 < len(got) <= 8192

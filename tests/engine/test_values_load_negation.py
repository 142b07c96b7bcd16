"""A long INSERT ... VALUES that negates a number (`-?`, `-9223372036854775808`) loads or
fails as the ordinary insert does: a negated number that is out of the BIGINT range before
its sign is taken is an error either way, and nothing is inserted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.statements.values_load import BULK_VALUES_ROWS
from refimpl.engine.storage import values
from refimpl.errors import InvalidValue

COUNT = BULK_VALUES_ROWS + 10


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    instance = Instance.open(tmp_path / "data")
    session = instance.session()
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, b BIGINT, x DOUBLE)")
    yield session
    session.close()
    instance.close()


def _insert(session: Session, column: str, value: str, params: list[Any], rows: int) -> None:
    marks = ", ".join(f"({n}, {value})" for n in range(rows))
    session.execute(f"INSERT INTO t (id, {column}) VALUES {marks}", params * rows)


@pytest.mark.parametrize("column", ["b", "x"])
@pytest.mark.parametrize(
    ("value", "params"),
    [
        ("-?", [values.BIGINT_MAX + 1]),  # a parameter past BIGINT, negated
        ("-?", [values.BIGINT_MIN]),  # its negation is past BIGINT
        ("-9223372036854775808", []),  # a literal past BIGINT, negated
    ],
)
def test_a_negated_number_past_bigint_fails_as_the_ordinary_insert_does(
    session: Session, column: str, value: str, params: list[Any]
) -> None:
    for rows in (3, COUNT):  # the ordinary way, then the load's
        with pytest.raises(InvalidValue, match="out of range for BIGINT"):
            _insert(session, column, value, params, rows)
        assert session.execute("SELECT count(*) FROM t").rows == [(0,)]


@pytest.mark.parametrize("column", ["b", "x"])
def test_a_negated_number_within_bigint_loads(session: Session, column: str) -> None:
    _insert(session, column, "-?", [values.BIGINT_MAX], COUNT)
    got = session.execute(f"SELECT count(*), min({column}) FROM t").rows
    assert got == [(COUNT, -values.BIGINT_MAX if column == "b" else float(-values.BIGINT_MAX))]

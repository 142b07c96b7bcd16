"""A text of several statements sent at once (one simple `Query`) against PostgreSQL 15:
PostgreSQL gives all its statements one `statement_timestamp()`, the moment the message
came (its documentation: "the time of receipt of the latest command message from the
client"). Here each statement of such a text has its own, as it commits on its own: a
difference spec/sql.md ("Value functions") states."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from tests.differential.session import connected_pair


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair() as pair:
        yield pair


def _moments(conn: psycopg.Connection) -> list[datetime]:
    """The first value of each statement's answer to one text (psycopg sends a text without
    parameters as one simple Query)."""
    cursor = conn.execute(
        "SELECT statement_timestamp(); SELECT count(*) FROM pg_class; SELECT statement_timestamp()"
    )
    moments: list[datetime] = []
    while True:
        moments.append(cursor.fetchone()[0])  # type: ignore[index]
        if not cursor.nextset():
            return moments


def test_a_text_sent_at_once_has_one_statement_timestamp_there_and_one_each_here(both) -> None:
    theirs, ours = both
    pg, mine = _moments(theirs), _moments(ours)
    assert pg[0] == pg[2], pg  # PostgreSQL's one moment
    assert mine[0] < mine[2], mine  # each statement its own start (spec/sql.md)

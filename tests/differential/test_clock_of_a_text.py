"""A text of several statements sent at once (one simple `Query`) against PostgreSQL 15:
both give all its statements one `statement_timestamp()`, the moment the message came
(PostgreSQL's documentation: "the time of receipt of the latest command message from the
client"), and one `now()`, as they run them as one transaction (spec/pgwire.md, "Queries";
spec/sql.md, "Value functions"); the next text has a later one."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from tests.differential.session import connected_pair

TEXT = (
    "SELECT statement_timestamp(), now(); SELECT count(*) FROM pg_class;"
    " SELECT statement_timestamp(), now()"
)


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair() as pair:
        yield pair


def _moments(conn: psycopg.Connection) -> list[tuple]:
    """The first row of each statement's answer to one text (psycopg sends a text without
    parameters as one simple Query)."""
    cursor = conn.execute(TEXT)
    rows: list[tuple] = []
    while True:
        rows.append(cursor.fetchone())  # type: ignore[arg-type]
        if not cursor.nextset():
            return rows


def _shape(rows: list[tuple]) -> tuple[bool, bool]:
    """Whether the text's statements saw one statement_timestamp() and one now(), that of
    the statement's start."""
    first, _, last = rows
    return first == last, first[0] == first[1]


def test_a_text_sent_at_once_has_one_moment_here_as_there(both) -> None:
    theirs, ours = both
    pg, mine = _moments(theirs), _moments(ours)
    assert _shape(pg) == (True, True), pg
    assert _shape(mine) == _shape(pg), mine
    again: datetime = _moments(ours)[0][0]
    assert again > mine[0][0]  # the next text's moment is its own

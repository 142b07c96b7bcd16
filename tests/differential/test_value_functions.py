"""SQL's value functions (`current_user`, `CURRENT_TIMESTAMP(3)`, ...) against PostgreSQL 15:
the same answers, column names and errors (by SQLSTATE class), but for the dialect choices
spec/sql.md lists (`current-user-call`, `no-date-or-time`). The users differ (postgres
there, admin here), so answers that name one compare it with another function's."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

import psycopg
import pytest

from tests.differential.compare import explain, run, same
from tests.differential.session import connected_pair

KEYWORDS = (
    "current_user, session_user, current_role, user, current_schema, current_catalog,"
    " CURRENT_TIMESTAMP, LOCALTIMESTAMP, CURRENT_TIMESTAMP(3), LOCALTIMESTAMP(0)"
)
# Statements both answer alike (rows, or an error of one SQLSTATE class), in this order.
ALIKE = [
    "SELECT current_user = session_user AS a, current_user = user AS b,"
    " current_role = current_user AS c, current_user = current_user AS d",
    "SELECT current_schema, current_schema() AS s, current_catalog = current_database() AS c",
    "SELECT CURRENT_TIMESTAMP = now() AS a, LOCALTIMESTAMP(6) = LOCALTIMESTAMP AS b,"
    " CURRENT_TIMESTAMP(0) >= date_trunc('second', CURRENT_TIMESTAMP) AS c",
    'SELECT "user", vf.user, n, user = "user" AS mine FROM vf',
    "SELECT count(*) AS n FROM vf WHERE user = current_user",
    'UPDATE vf SET n = n + 1 WHERE "user" <> current_user RETURNING n, user = current_user',
    'INSERT INTO vf VALUES (session_user, 5) RETURNING "user" = current_user AS mine, n',
    'DELETE FROM vf WHERE "user" = current_role RETURNING n',
    "SELECT session_user()",
    "SELECT current_role()",
    "SELECT current_catalog()",
    "SELECT current_timestamp()",
    "SELECT localtimestamp(1.5)",
    'SELECT "user"()',
    'SELECT "current_timestamp"()',
    "SELECT user()",  # 42601 there, 42883 here: both class 42
]
# The clock's functions in and out of a transaction block, run in this order: what each
# answers of the others (the times themselves are each server's own clock). In a block,
# now() and its spellings are its BEGIN's, in every statement and row; statement_timestamp()
# each statement's start; clock_timestamp() each call's; outside one, a statement is its
# own transaction.
CLOCK = [
    "SELECT now() = statement_timestamp() AS a, now() = transaction_timestamp() AS b,"
    " now() = CURRENT_TIMESTAMP AS c, now() = LOCALTIMESTAMP AS d,"
    " clock_timestamp() >= statement_timestamp() AS e",
    "BEGIN",
    "INSERT INTO clock VALUES (1, now(), statement_timestamp()),"
    " (2, CURRENT_TIMESTAMP, statement_timestamp())",
    "INSERT INTO clock SELECT 3, transaction_timestamp(), statement_timestamp()",
    "UPDATE clock SET at = LOCALTIMESTAMP WHERE id = 2 RETURNING at = now() AS same",
    "SELECT count(DISTINCT at) AS n, min(at) = now() AS start, count(DISTINCT began) AS own,"
    " min(began) > now() AS after_begin FROM clock",
    "SELECT statement_timestamp() > now() AS later, clock_timestamp() >= statement_timestamp()"
    " AS moving, now() = CURRENT_TIMESTAMP(6) AS a, transaction_timestamp() = now() AS b",
    "COMMIT",
    "SELECT now() = statement_timestamp() AS own, now() > max(at) AS after FROM clock",
    "DELETE FROM clock",
]
# Statements that differ by a documented choice: (statement, the choice's id).
CHOSEN = [
    ("SELECT current_user()", "current-user-call"),
    ("SELECT current_user() = current_user AS same", "current-user-call"),
    ("SELECT current_date", "no-date-or-time"),
    ("SELECT current_time(2)", "no-date-or-time"),
    ("SELECT localtime", "no-date-or-time"),
]


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair(
        'CREATE TABLE vf ("user" TEXT, n INT)',
        "INSERT INTO vf VALUES ('ram', 1)",
        "CREATE TABLE clock (id INT, at timestamptz, began timestamptz)",
        "SET TIME ZONE 'UTC'",  # LOCALTIMESTAMP = now() there too
    ) as pair:
        yield pair


def test_they_answer_alike(both) -> None:
    theirs, ours = both
    for sql in ALIKE:
        pg, mine = run(theirs, sql), run(ours, sql)
        assert same(pg, mine, ordered=True), f"{sql}\n  PostgreSQL: {pg}\n  refimpl:    {mine}"


def test_the_clock_answers_alike_in_and_out_of_a_transaction_block(both) -> None:
    theirs, ours = both
    for _ in range(2):  # the second time, nothing kept from the first may answer
        for sql in CLOCK:
            pg, mine = run(theirs, sql), run(ours, sql)
            assert same(pg, mine, ordered=True), f"{sql}\n  PostgreSQL: {pg}\n  refimpl: {mine}"
            assert pg.rows is not None and all(v is not False for r in pg.rows for v in r), pg


def test_their_columns_are_named_as_postgresql_names_them(both) -> None:
    theirs, ours = both
    names = [
        [column.name for column in conn.execute(f"SELECT {KEYWORDS}").description or ()]
        for conn in (theirs, ours)
    ]
    assert names[0] == names[1]
    assert names[1][6:] == ["current_timestamp", "localtimestamp"] * 2


@pytest.mark.parametrize("binary", [False, True])
def test_each_is_typed_as_postgresql_types_it(both, binary: bool) -> None:
    """`name` for the session's names, `timestamp` for LOCALTIMESTAMP (read as a moment
    without a zone), `timestamptz` for the rest of the clock; an expression over a name is
    text on both."""
    theirs, ours = both
    sql = (
        f"SELECT {KEYWORDS}, current_database(), current_schema(), now(),"
        " transaction_timestamp(), statement_timestamp(), clock_timestamp(),"
        " current_user || '' AS text"
    )
    answers = []
    for conn in (theirs, ours):
        cursor = conn.cursor(binary=binary)
        cursor.execute(sql)
        answers.append(([c.type_code for c in cursor.description or ()], cursor.fetchall()))
    (pg_types, pg_rows), (types, rows) = answers
    assert types == pg_types
    assert types[:6] == [19] * 6 and types[7] == 1114 and types[-1] == 25
    zones = [[v.tzinfo is None for v in row if isinstance(v, datetime)] for row in rows + pg_rows]
    assert zones[0] == zones[1]


@pytest.mark.parametrize(("sql", "choice"), CHOSEN)
def test_the_differences_are_the_documented_choices(both, sql: str, choice: str) -> None:
    theirs, ours = both
    pg, mine = run(theirs, sql), run(ours, sql)
    assert not same(pg, mine, ordered=True)
    assert explain(sql, pg, mine) == choice, f"{sql}\n  PostgreSQL: {pg}\n  refimpl:    {mine}"

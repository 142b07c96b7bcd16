"""Running one query on PostgreSQL and on refimpl (both through psycopg, so values arrive
alike) and saying whether the answers differ: rows as multisets unless the query's ORDER BY
fixes their order, numbers compared to nine significant digits (avg is numeric in
PostgreSQL, DOUBLE here), errors by their SQLSTATE class. A difference is then matched
against the dialect choices of spec/sql.md; one that matches none is a failure."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg

from tests.differential.generate import create_statements, literal

SPEC = Path(__file__).resolve().parents[2] / "spec" / "sql.md"


@dataclass(frozen=True)
class Outcome:
    """Rows (normalised), or the SQLSTATE of the error."""

    rows: list[tuple] | None
    sqlstate: str | None = None
    message: str = ""


def _value(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float | Decimal):
        number = float(value)
        return 0.0 if number == 0 else float(f"{number:.9g}")
    return str(value)


def run(conn: psycopg.Connection, sql: str) -> Outcome:
    try:
        cursor = conn.execute(sql)
        rows = cursor.fetchall() if cursor.description else []
    except psycopg.Error as error:
        return Outcome(
            None, error.sqlstate or "?", str(error).splitlines()[0] if str(error) else ""
        )
    return Outcome([tuple(_value(v) for v in row) for row in rows])


def load(conn: psycopg.Connection, data: dict[str, list[tuple]]) -> None:
    """The three tables (made the first time) holding `data`'s rows, in one transaction."""
    if not _made(conn):
        for statement in create_statements():
            conn.execute(statement)
    with conn.transaction():
        for table, rows in data.items():
            conn.execute(f"DELETE FROM {table}")
            if rows:
                values = ", ".join("(" + ", ".join(map(literal, row)) + ")" for row in rows)
                conn.execute(f"INSERT INTO {table} VALUES {values}")


def _made(conn: psycopg.Connection) -> bool:
    try:
        conn.execute("SELECT count(*) FROM t0").fetchall()
    except psycopg.Error:
        return False
    return True


def same(pg: Outcome, ours: Outcome, ordered: bool) -> bool:
    if pg.rows is None or ours.rows is None:
        classes = (pg.sqlstate or "")[:2], (ours.sqlstate or "")[:2]  # an error has one
        return pg.rows is None and ours.rows is None and classes[0] == classes[1]
    if ordered:
        return pg.rows == ours.rows
    return Counter(pg.rows) == Counter(ours.rows)


# -- the dialect choices ------------------------------------------------------------------


@dataclass(frozen=True)
class Choice:
    """A documented difference: its id in spec/sql.md's table, and how to recognise it."""

    id: str
    matches: Callable[[str, Outcome, Outcome], bool]


def _pg_error(code: str) -> Callable[[str, Outcome, Outcome], bool]:
    return lambda sql, pg, ours: pg.sqlstate == code and ours.sqlstate != code


CHOICES: list[Choice] = [
    # x / 0 and x % 0 answer NULL (SQLite's rule, which the corpus relies on).
    Choice("division-by-zero", _pg_error("22012")),
    # FULL JOIN takes any ON condition; PostgreSQL only equalities it can merge or hash.
    Choice(
        "full-join-condition",
        lambda sql, pg, ours: pg.sqlstate == "0A000" and "FULL JOIN" in sql,
    ),
    # A scalar subquery of several rows raises 21000 wherever it is evaluated; PostgreSQL's
    # optimizer folds a strict operator with a NULL constant without running it, and runs
    # NULLIF's second argument when the first is NULL: one side refuses, the other answers.
    Choice(
        "subquery-rows-unevaluated",
        lambda sql, pg, ours: (
            "21000" in (pg.sqlstate, ours.sqlstate)
            and (pg.rows is None) != (ours.rows is None)
            and "NULL" in sql
            and re.search(r"(?<!EXISTS )(?<!IN )(?<!ANY )(?<!ALL )\(SELECT ", sql) is not None
        ),
    ),
    # LIKE has no escape character unless ESCAPE names one (SQLite's LIKE); PostgreSQL's
    # escapes with a backslash by default. Only a pattern with a backslash can differ.
    Choice("like-backslash", lambda sql, pg, ours: re.search(r"LIKE '[^']*\\", sql) is not None),
    # An ON may name any table before it, across commas (SQLite's left-to-right reading);
    # PostgreSQL sees only the items of its own join.
    Choice(
        "on-names-earlier-tables",
        lambda sql, pg, ours: (
            pg.sqlstate == "42P01"
            and "invalid reference to FROM-clause entry" in pg.message
            and ours.rows is not None
        ),
    ),
    # `current_user()` is `current_user` here (texts kept before the keyword hold it);
    # PostgreSQL's grammar refuses the parentheses after the keyword.
    Choice(
        "current-user-call",
        lambda sql, pg, ours: (
            pg.sqlstate == "42601"
            and ours.rows is not None
            and re.search(r"(?<![.\w\"])current_user\s*\(", sql, re.IGNORECASE) is not None
        ),
    ),
    # No DATE or TIME type: their value functions are refused (0A000), as the types are.
    Choice(
        "no-date-or-time",
        lambda sql, pg, ours: (
            ours.sqlstate == "0A000"
            and pg.rows is not None
            and re.search(r"\b(current_date|current_time|localtime)\b", sql, re.IGNORECASE)
            is not None
        ),
    ),
]


def choice_ids_in_spec() -> list[str]:
    """The ids of the dialect-choices table of spec/sql.md, in order."""
    text = SPEC.read_text()
    start = text.index("### Dialect choices")
    table = text[start:].split("\n\n")
    rows = next(part for part in table if part.startswith("| id |"))
    return [
        match.group(1)
        for line in rows.splitlines()[2:]
        if (match := re.match(r"\|\s*`([a-z0-9-]+)`", line))
    ]


def explain(sql: str, pg: Outcome, ours: Outcome) -> str | None:
    """The id of the dialect choice that accounts for the difference, or None."""
    for choice in CHOICES:
        if choice.matches(sql, pg, ours):
            return choice.id
    return None

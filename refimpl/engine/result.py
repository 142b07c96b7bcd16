"""What running a statement gives back: the shape every front end serialises."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Column:
    """A result column: its name and its type name (INT, DOUBLE, STRING, ...). `pg_name` is
    the name PostgreSQL gives it where that differs (`?column?` for `SELECT 1`, which /exec
    names `1`: see `refimpl.engine.query.pg_names`), None where both name it alike.
    `pg_type` is PostgreSQL's type of it where `type` does not say it and the values are the
    same (`name` for `current_user`, a STRING; `timestamp` for LOCALTIMESTAMP, a TIMESTAMP
    in UTC), None where `type` says it. `pg_typmod` is PostgreSQL's type modifier of it
    (the precision of `CURRENT_TIMESTAMP(3)`: 3), -1 where it has none."""

    name: str
    type: str
    pg_name: str | None = None
    pg_type: str | None = None
    pg_typmod: int = -1


@dataclass(slots=True)
class Result:
    """The answer of one statement (or of a script: its last statement's answer).

    `columns` is None for a statement that is not a query; then `message` says what happened
    and `count` how many rows it touched. For a query, `rows` holds tuples of Python values
    (TIMESTAMP as int microseconds) and `count` is `len(rows)`.
    """

    query: str
    columns: list[Column] | None = None
    rows: list[tuple] = field(default_factory=list)
    message: str | None = None
    count: int = 0
    statements: int = 1

    @property
    def is_query(self) -> bool:
        return self.columns is not None


# The catalog's OID type (PostgreSQL's `oid`) and its arrays are named by what they compute
# as, where a result's column types are shown by name (the HTTP API's answers); only the
# PostgreSQL protocol tells them apart, by their type OIDs.
_SHOWN_TYPES = {"OID": "BIGINT", "OID[]": "BIGINT[]"}


def shown_type(type_: str) -> str:
    """A column type's name as the HTTP API shows it: BIGINT for OID, else the type's own."""
    return _SHOWN_TYPES.get(type_, type_)


def message_result(query: str, message: str, count: int = 0) -> Result:
    return Result(query=query, message=message, count=count)


def query_result(query: str, columns: list[Column], rows: list[tuple]) -> Result:
    return Result(query=query, columns=columns, rows=rows, count=len(rows))

"""SQL's value functions over the protocol are typed as PostgreSQL 15 types them where the
value is the same (spec/pgwire.md, "Types"): the session's names are `name` (19), LOCALTIMESTAMP
`timestamp` (1114, its text without a zone, its binary timestamptz's); /exec still names them
STRING and TIMESTAMP, and an expression over one is typed by the engine's type."""

from __future__ import annotations

from datetime import UTC

import pytest

from refimpl.engine.result import Column
from refimpl.pgwire import types as t
from tests.pgwire.conftest import PgServer

# Each item with the type OID PostgreSQL 15 gives it.
TYPED = {
    "current_user": 19,
    "session_user": 19,
    "user": 19,
    "current_role": 19,
    "current_catalog": 19,
    "current_schema": 19,
    "current_schema()": 19,
    "current_database()": 19,
    "LOCALTIMESTAMP": 1114,
    "LOCALTIMESTAMP(3)": 1114,
    "CURRENT_TIMESTAMP": 1184,
    "now()": 1184,
    "current_user || 'x'": 25,
    "lower(current_user)": 25,
}


@pytest.mark.parametrize("binary", [False, True])
def test_value_functions_are_typed_as_postgresql_types_them(
    pg: PgServer, db: str, binary: bool
) -> None:
    query = "SELECT " + ", ".join(TYPED)
    with pg.connect(db) as conn:
        cursor = conn.cursor(binary=binary)
        cursor.execute(query)
        oids = [c.type_code for c in cursor.description or []]
        (row,) = cursor.fetchall()
        ((now,),) = conn.execute("SELECT now()").fetchall()
    assert dict(zip(TYPED, oids, strict=True)) == TYPED
    names = row[:8]
    assert names == ("admin", "admin", "admin", "admin", db, "public", "public", db)
    local, rounded, current = row[8:11]
    assert local.tzinfo is None and current.tzinfo is not None
    assert local.replace(tzinfo=UTC) == current  # one moment, written without its zone
    assert rounded.microsecond % 1000 == 0
    assert now > current  # the next statement's own
    over_exec = pg.http.sql(query, db)["columns"]
    assert [c["type"] for c in over_exec][:11] == ["STRING"] * 8 + ["TIMESTAMP"] * 3


def test_a_local_timestamp_is_written_as_postgresql_writes_one() -> None:
    local = Column("localtimestamp", "TIMESTAMP", None, "timestamp")
    shape = t.RowShape.of([local, Column("at", "TIMESTAMP")], [0, 0])
    micros = 1_790_000_000_500_000  # 2026-09-21 14:13:20.5 UTC
    assert [f.type_oid for f in shape.description.fields] == [1114, 1184]
    assert [encode(micros) for encode in shape.encoders] == [
        b"2026-09-21 14:13:20.5",
        b"2026-09-21 14:13:20.5+00",
    ]
    binary = t.RowShape.of([local, Column("at", "TIMESTAMP")], [1, 1])
    assert binary.encoders[0](micros) == binary.encoders[1](micros)


def test_a_columns_type_modifier_is_sent_in_its_field() -> None:
    """The precision of CURRENT_TIMESTAMP(3) is its field's type modifier, as PostgreSQL
    sends it; a column without one sends -1."""
    columns = [
        Column("current_timestamp", "TIMESTAMP", pg_typmod=3),
        Column("localtimestamp", "TIMESTAMP", None, "timestamp", 0),
        Column("at", "TIMESTAMP"),
    ]
    shape = t.RowShape.of(columns, [0, 1, 0])
    fields = shape.description.fields
    assert [(f.type_oid, f.type_modifier) for f in fields] == [(1184, 3), (1114, 0), (1184, -1)]

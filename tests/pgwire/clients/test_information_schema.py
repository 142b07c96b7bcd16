"""`information_schema` over psycopg against a real server: tables, columns with
PostgreSQL's type names, schemata, views, PRIMARY KEY and UNIQUE constraints and their
columns; a user sees only what it may read, and a table named like one of the views hides
nothing."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors as pgerrors

from tests.pgwire.conftest import PgServer

_TABLE = (
    "CREATE TABLE m (id BIGINT PRIMARY KEY, ts TIMESTAMP, v DOUBLE, name STRING,"
    " ok BOOLEAN, n INT, UNIQUE (name))"
)


def _rows(conn: psycopg.Connection, query: str) -> list[tuple[object, ...]]:
    return conn.execute(query).fetchall()


def test_tables_columns_and_views_are_listed_with_postgresql_names(pg: PgServer, db: str) -> None:
    pg.http.sql(_TABLE, db)
    pg.http.sql("CREATE VIEW mv AS SELECT id, v FROM m", db)
    with pg.connect(db) as conn:
        tables = _rows(
            conn,
            "SELECT table_catalog, table_schema, table_name, table_type"
            " FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
        )
        assert tables == [(db, "public", "m", "BASE TABLE"), (db, "public", "mv", "VIEW")]
        columns = _rows(
            conn,
            "SELECT column_name, ordinal_position, data_type, is_nullable, column_default,"
            " udt_name FROM information_schema.columns WHERE table_name = 'm'"
            " ORDER BY ordinal_position",
        )
        assert columns == [
            ("id", 1, "bigint", "NO", None, "int8"),
            ("ts", 2, "timestamp with time zone", "YES", None, "timestamptz"),
            ("v", 3, "double precision", "YES", None, "float8"),
            ("name", 4, "text", "YES", None, "text"),
            ("ok", 5, "boolean", "YES", None, "bool"),
            ("n", 6, "integer", "YES", None, "int4"),
        ]
        # A view's columns are those a read of it answers.
        assert _rows(
            conn,
            "SELECT c.column_name, c.data_type FROM information_schema.columns c"
            " JOIN information_schema.tables t ON t.table_name = c.table_name"
            " WHERE t.table_type = 'VIEW' ORDER BY c.ordinal_position",
        ) == [("id", "bigint"), ("v", "double precision")]
        views = _rows(conn, "SELECT table_name, view_definition FROM information_schema.views")
        assert len(views) == 1 and views[0][0] == "mv" and "FROM m" in str(views[0][1])
        schemas = _rows(conn, "SELECT schema_name FROM information_schema.schemata ORDER BY 1")
        assert schemas == [("information_schema",), ("pg_catalog",), ("public",)]
        # The type PostgreSQL's clients read: ordinal_position an integer, names text.
        cur = conn.execute("SELECT table_name, ordinal_position FROM information_schema.columns")
        assert [d.type_code for d in cur.description or ()] == [25, 23]


def test_constraints_and_their_key_columns(pg: PgServer, db: str) -> None:
    pg.http.sql(_TABLE, db)
    pg.http.sql("CREATE TABLE pair (a INT, b STRING, PRIMARY KEY (a, b))", db)
    with pg.connect(db) as conn:
        assert _rows(
            conn,
            "SELECT constraint_name, table_name, constraint_type"
            " FROM information_schema.table_constraints ORDER BY constraint_name",
        ) == [
            ("m_name_key", "m", "UNIQUE"),
            ("m_pkey", "m", "PRIMARY KEY"),
            ("pair_pkey", "pair", "PRIMARY KEY"),
        ]
        # What SQLAlchemy-like tools join to find a table's primary key columns, in order.
        assert _rows(
            conn,
            "SELECT k.column_name, k.ordinal_position FROM information_schema.table_constraints c"
            " JOIN information_schema.key_column_usage k ON k.constraint_name = c.constraint_name"
            " WHERE c.table_name = 'pair' AND c.constraint_type = 'PRIMARY KEY'"
            " ORDER BY k.ordinal_position",
        ) == [("a", 1), ("b", 2)]


def test_a_user_sees_nothing_of_a_table_it_may_not_read(pg: PgServer, db: str) -> None:
    pg.http.sql(_TABLE, db)
    pg.http.sql("CREATE TABLE open_t (id INT PRIMARY KEY)", db)
    pg.http.sql("CREATE VIEW mv AS SELECT id FROM m", db)
    with pg.connect(db) as admin:
        admin.execute("CREATE USER IF NOT EXISTS narrow_reader")
        admin.execute("GRANT SELECT ON TABLE open_t TO narrow_reader")
        token = admin.execute("CREATE TOKEN FOR narrow_reader").fetchone()
    assert token is not None
    with pg.connect(db, user="narrow_reader", password=token[0]) as reader:
        for view, column in [
            ("tables", "table_name"),
            ("columns", "table_name"),
            ("table_constraints", "table_name"),
            ("key_column_usage", "table_name"),
        ]:
            seen = _rows(
                reader,
                f"SELECT DISTINCT {column} FROM information_schema.{view}"
                " WHERE table_schema = 'public'",
            )
            assert seen == [("open_t",)], view
        # The view reads `m`, which the reader may not read: it is not listed either.
        assert _rows(reader, "SELECT table_name FROM information_schema.views") == []


def test_a_table_named_tables_hides_nothing_and_other_schemas_are_errors(
    pg: PgServer, db: str
) -> None:
    pg.http.sql("CREATE TABLE tables (x INT)", db)
    pg.http.sql("INSERT INTO tables VALUES (7)", db)
    with pg.connect(db) as conn:
        assert _rows(conn, "SELECT x FROM tables") == [(7,)]
        assert _rows(
            conn,
            "SELECT table_schema, table_type FROM information_schema.tables"
            " WHERE table_name = 'tables' ORDER BY table_schema",
        ) == [("information_schema", "VIEW"), ("public", "BASE TABLE")]
        with pytest.raises(pgerrors.SyntaxError, match="schema 'nope' does not exist"):
            conn.execute("SELECT * FROM nope.tables")


def test_a_view_is_named_by_its_bare_name_or_with_its_schema(pg: PgServer, db: str) -> None:
    pg.http.sql(_TABLE, db)
    with pg.connect(db) as conn:
        rows = _rows(
            conn,
            "SELECT tables.table_name, information_schema.tables.table_type, c.column_name"
            " FROM information_schema.tables JOIN information_schema.columns c"
            " ON c.table_name = tables.table_name WHERE c.ordinal_position = 1"
            " AND tables.table_schema = 'public'",
        )
        assert rows == [("m", "BASE TABLE", "id")]
        with pytest.raises(pgerrors.UndefinedColumn):
            conn.execute("SELECT columns.table_name FROM information_schema.tables")

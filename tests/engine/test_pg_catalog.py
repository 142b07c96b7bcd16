"""PostgreSQL's catalog relations as the engine answers them: views are `pg_class` rows of
`relkind` 'v' with the columns a read of them answers, and only for a caller who may read
them (READ on the view and on the tables its query reads); the catalog's own relations are
`pg_class` rows too, in `pg_catalog` and `information_schema`, for every caller."""

from __future__ import annotations

import pytest

from refimpl.engine.access import Principal
from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.statements.pg_catalog import RELATIONS, name_oid
from refimpl.engine.statements.pg_fixed import CATALOG_RELATIONS
from refimpl.errors import SqlError

VIEWS = (
    "SELECT c.relname, c.relkind, c.relam, c.relhasindex, c.oid FROM pg_catalog.pg_class c"
    " WHERE c.relkind = 'v' AND c.relnamespace = 2200 ORDER BY c.relname"
)
COLUMNS = (
    "SELECT c.relname, a.attnum, a.attname, pg_catalog.format_type(a.atttypid, NULL),"
    " a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c"
    " ON c.oid = a.attrelid WHERE c.relkind = 'v' AND c.relnamespace = 2200"
    " ORDER BY c.relname, a.attnum"
)


def _setup(session: Session) -> None:
    session.execute(
        "CREATE TABLE t (id INT PRIMARY KEY, name STRING, price DOUBLE, at TIMESTAMP);"
        " CREATE TABLE secret (k BIGINT, ok BOOLEAN);"
        " CREATE VIEW v AS SELECT id, name, price * 2 AS twice, at FROM t;"
        " CREATE VIEW Totals AS SELECT name, count(*) AS n, max(id) AS top, NULL AS nothing"
        " FROM t GROUP BY name;"
        " CREATE VIEW hush AS SELECT s.k, s.ok, t.name FROM secret s JOIN t ON t.id = s.k;"
        " CREATE VIEW over_v AS SELECT twice FROM v;"
        # reader may read every table and view but secret; t_only the table t alone.
        " CREATE USER reader; GRANT READ ON DATABASE demo TO reader;"
        " REVOKE SELECT ON secret FROM reader;"
        " CREATE USER t_only; GRANT SELECT ON t TO t_only"
    )


def test_views_are_relations_of_kind_v_with_their_columns_types(session: Session) -> None:
    _setup(session)
    # Names ordered as the C collation orders them (pg_database's datcollate): capitals first.
    assert session.execute(VIEWS).rows == [
        ("Totals", "v", 0, False, name_oid("totals")),
        ("hush", "v", 0, False, name_oid("hush")),
        ("over_v", "v", 0, False, name_oid("over_v")),
        ("v", "v", 0, False, name_oid("v")),
    ]
    assert session.execute(COLUMNS).rows == [
        ("Totals", 1, "name", "text", False),
        ("Totals", 2, "n", "bigint", False),
        ("Totals", 3, "top", "integer", False),
        ("Totals", 4, "nothing", "text", False),  # a column of NULLs reads as text
        ("hush", 1, "k", "bigint", False),
        ("hush", 2, "ok", "boolean", False),
        ("hush", 3, "name", "text", False),
        ("over_v", 1, "twice", "double precision", False),
        ("v", 1, "id", "integer", False),
        ("v", 2, "name", "text", False),
        ("v", 3, "twice", "double precision", False),
        ("v", 4, "at", "timestamp with time zone", False),
    ]
    definition = session.execute(
        "SELECT pg_catalog.pg_get_viewdef(c.oid, true) AS d, pg_catalog.pg_get_viewdef(c.oid)"
        " AS plain, pg_catalog.pg_table_size(c.oid) AS size FROM pg_catalog.pg_class c"
        " WHERE c.relname = 'over_v'"
    ).rows
    assert definition == [(" SELECT twice FROM v;", " SELECT twice FROM v;", 0)]
    assert session.execute("SELECT pg_catalog.pg_get_viewdef(1)").rows == [(None,)]


def test_a_reader_sees_only_the_views_it_may_read(instance: Instance, session: Session) -> None:
    _setup(session)
    reader = instance.session(principal=Principal("reader"))
    t_only = instance.session(principal=Principal("t_only"))
    try:
        # hush reads secret, which the reader may not read: no row, no column, no definition.
        assert [row[0] for row in reader.execute(VIEWS).rows] == ["Totals", "over_v", "v"]
        assert {row[0] for row in reader.execute(COLUMNS).rows} == {"over_v", "Totals", "v"}
        hidden = reader.execute(
            f"SELECT pg_catalog.pg_get_viewdef({name_oid('hush')}) AS d,"
            f" pg_catalog.pg_table_size({name_oid('hush')}) AS size"
        ).rows
        assert hidden == [(None, None)]
        # READ on the tables a view reads is not READ on the view.
        assert t_only.execute(VIEWS).rows == t_only.execute(COLUMNS).rows == []
        assert t_only.execute(f"SELECT pg_catalog.pg_get_viewdef({name_oid('v')})").rows == [
            (None,)
        ]
        session.execute("GRANT SELECT ON secret TO reader")
        assert [row[0] for row in reader.execute(VIEWS).rows] == ["Totals", "hush", "over_v", "v"]
        session.execute("REVOKE SELECT ON t FROM reader")  # every view reads t
        assert reader.execute(VIEWS).rows == reader.execute(COLUMNS).rows == []
    finally:
        reader.close()
        t_only.close()


def test_a_view_that_cannot_be_read_has_no_row(session: Session) -> None:
    session.execute(
        "CREATE TABLE gone (x INT); CREATE VIEW lost AS SELECT x FROM gone;"
        " CREATE VIEW of_class AS SELECT relname, relkind FROM pg_catalog.pg_class"
        " WHERE relnamespace = 2200"
    )
    # A view of pg_class has its own row: its shape is known without listing the views.
    assert [row[0] for row in session.execute(VIEWS).rows] == ["lost", "of_class"]
    assert session.execute(
        "SELECT relname FROM of_class WHERE relkind = 'v' ORDER BY relname"
    ).rows == [("lost",), ("of_class",)]
    session.execute("DROP TABLE gone")
    assert [row[0] for row in session.execute(VIEWS).rows] == ["of_class"]


def test_a_views_columns_are_known_without_reading_its_rows(session: Session) -> None:
    session.execute(
        "CREATE TABLE words (w STRING); CREATE VIEW numbers AS"
        " SELECT CAST(w AS INT) AS n FROM words; INSERT INTO words VALUES ('abc')"
    )
    with pytest.raises(SqlError):
        session.execute("SELECT * FROM numbers")  # its rows cannot be read; its shape can
    assert session.execute(COLUMNS).rows == [("numbers", 1, "n", "integer", False)]


def test_a_constraints_name_skips_a_view_of_that_name(session: Session) -> None:
    session.execute("CREATE VIEW w_pkey AS SELECT 1 AS one; CREATE TABLE w (id INT PRIMARY KEY)")
    rows = session.execute(
        "SELECT relname, relkind FROM pg_catalog.pg_class WHERE relname LIKE 'w%' ORDER BY relname"
    ).rows
    assert rows == [("w", "r"), ("w_pkey", "v"), ("w_pkey1", "i")]


SCHEMAS = (
    "SELECT n.nspname, c.relname, c.relkind, c.oid, pg_catalog.pg_table_is_visible(c.oid) AS seen"
    " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
)


def test_the_catalogs_own_relations_are_counted_in_an_empty_database(session: Session) -> None:
    assert set(CATALOG_RELATIONS) == set(RELATIONS)  # each relation answered has its row
    assert session.execute("SELECT count(*) FROM pg_class").rows == [(len(RELATIONS),)]
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")  # the table and its key's index
    assert session.execute("SELECT count(*) FROM pg_catalog.pg_class").rows == [
        (len(RELATIONS) + 2,)
    ]
    rows = session.execute(SCHEMAS + " WHERE c.relname IN ('pg_class', 'pg_roles', 'tables', 't')"
                           " ORDER BY c.oid").rows  # fmt: skip
    assert rows == [
        ("pg_catalog", "pg_class", "r", 1259, True),
        ("pg_catalog", "pg_roles", "v", 12000, True),
        # Not in the search path: psql's \dS leaves it out, as PostgreSQL's does.
        ("information_schema", "tables", "v", 13425, False),
        ("public", "t", "r", name_oid("t"), True),
    ]
    # A driver's `'pg_class'::regclass` (pgjdbc's, joining pg_description) is pg_class's row.
    assert session.execute(
        "SELECT c.relname FROM pg_class c WHERE c.oid = 'pg_class'::regclass"
        " OR c.oid = 'information_schema.views'::regclass ORDER BY 1"
    ).rows == [("pg_class",), ("views",)]


def test_a_table_of_a_catalogs_name_hides_its_row(instance: Instance, session: Session) -> None:
    session.execute("CREATE TABLE pg_user (x INT); CREATE USER reader")
    rows = session.execute(SCHEMAS + " WHERE c.relname = 'pg_user'").rows
    assert rows == [("public", "pg_user", "r", name_oid("pg_user"), True)]
    reader = instance.session(principal=Principal("reader"))
    try:  # a user holding no right is shown the catalog (PostgreSQL's public reads it)
        assert reader.execute("SELECT count(*) FROM pg_class").rows == [(len(RELATIONS) - 1,)]
    finally:
        reader.close()


def test_a_views_column_of_a_name_or_a_local_time_has_that_type(session: Session) -> None:
    """The types the protocol sends for them (`name`, `timestamp`) are in pg_type, and a
    view's column of one has it, as psql's \\d shows it in PostgreSQL."""
    session.execute("CREATE VIEW w AS SELECT current_user AS u, LOCALTIMESTAMP AS l, 1 AS n")
    assert session.execute(COLUMNS).rows == [
        ("w", 1, "u", "name", False),
        ("w", 2, "l", "timestamp without time zone", False),
        ("w", 3, "n", "integer", False),
    ]
    types = session.execute(
        "SELECT oid, typname, typlen, typbyval, typcategory, typelem, typarray FROM pg_type"
        " WHERE oid IN (19, 1003, 1114, 1115) ORDER BY oid"
    ).rows
    assert types == [
        (19, "name", 64, False, "S", 0, 1003),
        (1003, "_name", -1, False, "A", 19, 0),
        (1114, "timestamp", 8, True, "D", 0, 1115),
        (1115, "_timestamp", -1, False, "A", 1114, 0),
    ]
    assert session.execute("SELECT 'name'::regtype, 'timestamp'::regtype").rows == [(19, 1114)]


def test_a_views_column_of_a_precise_clock_keeps_its_precision(session: Session) -> None:
    session.execute("CREATE VIEW p AS SELECT CURRENT_TIMESTAMP(3) AS c, LOCALTIMESTAMP AS l")
    rows = session.execute(
        "SELECT a.attname, a.atttypmod, pg_catalog.format_type(a.atttypid, a.atttypmod)"
        " FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
        " WHERE c.relname = 'p' ORDER BY a.attnum"
    ).rows
    assert rows == [
        ("c", 3, "timestamp(3) with time zone"),
        ("l", -1, "timestamp without time zone"),
    ]


CATALOG_COLUMNS = (
    "SELECT a.attnum, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)"
    " FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
    " WHERE c.relname = '{}' ORDER BY a.attnum"
)


def test_the_catalogs_own_relations_have_their_columns(session: Session) -> None:
    assert session.execute(CATALOG_COLUMNS.format("pg_am")).rows == [
        (1, "oid", "oid"),
        (2, "amname", "text"),
        (3, "amtype", "text"),
    ]
    # Each as a read of it answers them, pg_attribute's own and information_schema's too.
    for name in ("pg_class", "pg_attribute", "pg_index", "information_schema.schemata"):
        read = session.execute(f"SELECT * FROM {name} WHERE false").columns or []
        listed = session.execute(CATALOG_COLUMNS.format(name.rpartition(".")[2])).rows
        assert [a for _, a, _ in listed] == [c.name for c in read], name
    oid, number = session.execute(
        "SELECT attrelid, attnum FROM pg_attribute WHERE attname = 'indkey'"
    ).rows[0]
    assert (oid, number) == (2610, 16)  # pg_index's OID, as in PostgreSQL


def test_a_table_of_a_catalogs_name_hides_its_columns(session: Session) -> None:
    session.execute("CREATE TABLE pg_am (x INT)")
    assert session.execute(CATALOG_COLUMNS.format("pg_am")).rows == [(1, "x", "integer")]
    assert session.execute("SELECT count(*) FROM pg_attribute WHERE attrelid = 2601").rows == [(0,)]

"""PostgreSQL's catalog relations as the engine answers them: views are `pg_class` rows of
`relkind` 'v' with the columns a read of them answers, and only for a caller who may read
them (READ on the view and on the tables its query reads)."""

from __future__ import annotations

import pytest

from refimpl.engine.access import Principal
from refimpl.engine.instance import Instance
from refimpl.engine.session import Session
from refimpl.engine.statements.pg_catalog import name_oid
from refimpl.errors import SqlError

VIEWS = (
    "SELECT c.relname, c.relkind, c.relam, c.relhasindex, c.oid FROM pg_catalog.pg_class c"
    " WHERE c.relkind = 'v' ORDER BY c.relname"
)
COLUMNS = (
    "SELECT c.relname, a.attnum, a.attname, pg_catalog.format_type(a.atttypid, NULL),"
    " a.attnotnull FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c"
    " ON c.oid = a.attrelid WHERE c.relkind = 'v' ORDER BY c.relname, a.attnum"
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

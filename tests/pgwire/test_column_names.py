"""A select list's column without an alias is named over the protocol as PostgreSQL 15 names
it (`SELECT 1` is `?column?`), where /exec names it by its expression's text (spec/sql.md)."""

from __future__ import annotations

from tests.pgwire.conftest import PgServer

# Each item with the name PostgreSQL 15 gives it and the one /exec gives it.
NAMED = {
    "1": ("?column?", "1"),
    "1 + 1": ("?column?", "1 + 1"),
    "t.id::text": ("id", "id"),
    "5::text": ("text", "CAST(5 AS STRING)"),
    "ARRAY[1, 2]": ("array", "ARRAY[1, 2]"),
    "'{1}'::int[]": ("int4", "('{1}')::int[]"),
    "ARRAY[1]::text[]": ("array", "(ARRAY[1])::text[]"),
    "(SELECT max(id) FROM t)": ("max", "(SELECT max(id) FROM t)"),
    "(SELECT 1)": ("?column?", "(SELECT 1)"),
    "EXISTS (SELECT 1)": ("exists", "EXISTS (SELECT 1)"),
    "CASE WHEN true THEN 1 END": ("case", "CASE WHEN TRUE THEN 1 END"),
    "(ARRAY[1, 2])[1]": ("array", "ARRAY[1, 2][1]"),
    "name": ("name", "name"),
    "lower(name)": ("lower", "lower"),
    "name IS NULL": ("?column?", "name IS NULL"),
    "'x' AS y": ("y", "y"),
}


def test_columns_are_named_as_postgresql_names_them(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db)
    pg.http.sql("INSERT INTO t VALUES (1, 'a')", db)
    query = "SELECT " + ", ".join(NAMED) + " FROM t"
    with pg.connect(db) as conn:
        over_pg = [c.name for c in conn.execute(query).description or []]
    over_exec = [c["name"] for c in pg.http.sql(query, db)["columns"]]
    assert list(zip(NAMED, over_pg, over_exec, strict=True)) == [
        (item, *names) for item, names in NAMED.items()
    ]


def test_a_union_and_a_grouped_query_name_their_columns_so(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, g STRING)", db)
    with pg.connect(db) as conn:
        union = conn.execute("SELECT 1, 'a' AS b UNION SELECT 2, 'c'").description or []
        grouped = conn.execute("SELECT g, count(*) + 0 FROM t GROUP BY g").description or []
    assert [c.name for c in union] == ["?column?", "b"]
    assert [c.name for c in grouped] == ["g", "?column?"]


def test_returning_names_its_columns_as_a_select_does(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, g STRING)", db)
    with pg.connect(db) as conn:
        cursor = conn.execute("INSERT INTO t VALUES (1, 'a') RETURNING id, id * 10, g AS h")
        answer = ([c.name for c in cursor.description or []], cursor.fetchall())
    assert answer == (["id", "?column?", "h"], [(1, 10, "a")])

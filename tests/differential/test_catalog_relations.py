"""The catalog's own relations against PostgreSQL 15's: each one refimpl lists in pg_class
(its schema, name, kind and OID) is a row of PostgreSQL's pg_class, and the schemas'
OIDs are the same, so a client's query naming them (psql's \\dS, pgjdbc's SYSTEM TABLE)
reads the same rows of them on both. Their columns in pg_attribute (psql's \\d pg_class)
are columns of PostgreSQL's relation of the same OID, of its type where that is one of
refimpl's (the rest are held as text, int4, float8 or an array of those); and
information_schema.tables lists them as PostgreSQL's does."""

from __future__ import annotations

from tests.differential.session import connected_pair

RELATIONS = (
    "SELECT n.oid, n.nspname, c.relname, c.relkind, c.oid FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
    " WHERE n.nspname IN ('pg_catalog', 'information_schema')"
)


def test_each_catalog_relation_is_postgresqls() -> None:
    with connected_pair() as (theirs, ours):
        mine = set(ours.execute(RELATIONS).fetchall())
        assert len(mine) > 30
        assert mine <= set(theirs.execute(RELATIONS).fetchall())
        counts = [
            conn.execute("SELECT count(*) FROM pg_class WHERE relname = 'pg_class'").fetchall()
            for conn in (theirs, ours)
        ]
        assert counts[0] == counts[1] == [(1,)]


ATTRIBUTES = (
    "SELECT a.attrelid, a.attname, a.atttypid FROM pg_catalog.pg_attribute a"
    " WHERE a.attrelid < 16384 AND a.attnum > 0"
)
# The types refimpl's values have (oid, bool, int4, int8, float8, text, timestamptz).
OWN_TYPES = frozenset({26, 16, 23, 20, 701, 25, 1184})


def test_each_catalog_relations_columns_are_postgresqls() -> None:
    with connected_pair() as (theirs, ours):
        pg = {(relid, name): kind for relid, name, kind in theirs.execute(ATTRIBUTES)}
        mine = ours.execute(ATTRIBUTES).fetchall()
        assert len(mine) > 300
        assert {(relid, name) for relid, name, _ in mine} <= set(pg)
        differing = [
            (relid, name, kind)
            for relid, name, kind in mine
            if pg[relid, name] in OWN_TYPES and kind != pg[relid, name]
        ]
        assert differing == []


OWN_TABLES = (
    "SELECT table_schema, table_name, table_type FROM information_schema.tables"
    " WHERE table_schema IN ('pg_catalog', 'information_schema')"
)


def test_information_schema_lists_the_catalog_relations_as_postgresql_does() -> None:
    with connected_pair() as (theirs, ours):
        mine = set(ours.execute(OWN_TABLES).fetchall())
        assert ("pg_catalog", "pg_class", "BASE TABLE") in mine
        assert ("information_schema", "tables", "VIEW") in mine
        assert mine <= set(theirs.execute(OWN_TABLES).fetchall())
        relations = ours.execute(RELATIONS).fetchall()
        assert {(schema, name) for _, schema, name, _, _ in relations} == {
            (schema, name) for schema, name, _ in mine
        }

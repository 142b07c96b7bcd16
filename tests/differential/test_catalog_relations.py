"""The catalog's own relations against PostgreSQL 15's: each one refimpl lists in pg_class
(its schema, name, kind and OID) is a row of PostgreSQL's pg_class, and the schemas'
OIDs are the same, so a client's query naming them (psql's \\dS, pgjdbc's SYSTEM TABLE)
reads the same rows of them on both."""

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

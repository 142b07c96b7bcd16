"""The types a client is told over the protocol beyond the column types' own: the catalog's
object identifiers as `oid` (26) and their arrays as `oid[]` (1028), each as PostgreSQL 15
describes the same query, in text and binary; /exec names them by what they compute as."""

from __future__ import annotations

from typing import Any

from tests.pgwire.conftest import PgServer

OID, OID_ARRAY, INT8, INT4, TEXT, BOOL = 26, 1028, 20, 23, 25, 16

# Each query with the type OIDs of its columns as PostgreSQL 15 answers it.
CATALOG_QUERIES = {
    "SELECT c.oid, c.relnamespace, c.relowner, c.relam FROM pg_catalog.pg_class c"
    " WHERE c.relname = 't'": [OID, OID, OID, OID],
    "SELECT a.attrelid, a.atttypid, a.attcollation FROM pg_catalog.pg_attribute a"
    " WHERE a.attrelid = 't'::regclass": [OID, OID, OID],
    "SELECT i.indrelid, i.indexrelid FROM pg_catalog.pg_index i": [OID, OID],
    "SELECT oid, typelem, typarray FROM pg_catalog.pg_type WHERE typname = 'int4'": [OID] * 3,
    "SELECT con.conrelid, con.conindid FROM pg_catalog.pg_constraint con": [OID, OID],
    "SELECT 't'::regclass::oid, 'int4'::regtype::oid, 1::oid": [OID, OID, OID],
    # PostgreSQL has no oid arithmetic: past a cast to int8, it is a bigint's.
    "SELECT c.oid::int8 + 1, c.oid = 1259 FROM pg_catalog.pg_class c": [INT8, BOOL],
    "SELECT c.oid::text FROM pg_catalog.pg_class c": [TEXT],
    "SELECT array_agg(a.atttypid) FROM pg_catalog.pg_attribute a"
    " WHERE a.attrelid = 't'::regclass": [OID_ARRAY],
}


def _described(pg: PgServer, db: str, query: str) -> list[int]:
    with pg.connect(db) as conn:
        cursor = conn.execute(query)
        return [column.type_code for column in cursor.description or []]


def test_catalog_oid_columns_are_described_as_postgresql_describes_them(
    pg: PgServer, db: str
) -> None:
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY, b BIGINT UNIQUE)", db)
    described = {query: _described(pg, db, query) for query in CATALOG_QUERIES}
    assert described == CATALOG_QUERIES


def test_oids_and_their_arrays_read_back_in_text_and_binary(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY, b BIGINT UNIQUE, c DOUBLE)", db)
    query = (
        "SELECT 't'::regclass::oid AS rel, array_agg(a.atttypid ORDER BY a.attnum) AS types"
        " FROM pg_catalog.pg_attribute a WHERE a.attrelid = 't'::regclass"
    )
    answers = []
    with pg.connect(db) as conn:
        for binary in (False, True):
            answers.append(conn.cursor(binary=binary).execute(query).fetchone())
    relation = pg.http.rows("SELECT oid FROM pg_class WHERE relname = 't'", db)[0][0]
    assert answers == [(relation, [25, 20, 701])] * 2


def test_asyncpg_reads_oid_arrays_without_asking_the_catalog(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY, b BIGINT)", db)

    async def work(conn: Any) -> Any:
        relation = await conn.fetchval("SELECT 't'::regclass")
        row = await conn.fetchrow(
            "SELECT array_agg(atttypid ORDER BY attnum) AS types, max(attrelid) AS rel"
            " FROM pg_catalog.pg_attribute WHERE attrelid = $1::oid",
            relation,
        )
        return relation, row

    relation, row = pg.run_asyncpg(db, work)
    assert (row["types"], row["rel"]) == ([25, 20], relation)


def test_a_parameter_compared_with_a_catalog_column_takes_its_type(pg: PgServer, db: str) -> None:
    # asyncpg encodes each parameter by the type the server describes: an int for an oid,
    # where a parameter described as text would take only a str.
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY)", db)

    async def work(conn: Any) -> Any:
        relation = await conn.fetchval(
            "SELECT oid FROM pg_catalog.pg_class WHERE relname = $1", "t"
        )
        statement = await conn.prepare(
            "SELECT c.relname, a.attname FROM pg_catalog.pg_class c"
            " JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid WHERE c.oid = $1"
        )
        types = [t.oid for t in statement.get_parameters()]
        return types, await statement.fetch(relation)

    types, rows = pg.run_asyncpg(db, work)
    assert (types, [tuple(r) for r in rows]) == ([OID], [("t", "a")])


def test_exec_names_oids_by_what_they_compute_as(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY)", db)
    answer = pg.http.sql(
        "SELECT c.oid, array_agg(a.atttypid) AS types, -c.oid AS negated FROM pg_class c"
        " JOIN pg_attribute a ON a.attrelid = c.oid WHERE c.relname = 't' GROUP BY c.oid",
        db,
    )
    assert [c["type"] for c in answer["columns"]] == ["BIGINT", "BIGINT[]", "BIGINT"]
    oid = answer["dataset"][0][0]
    assert answer["dataset"] == [[oid, "{25}", -oid]]


def test_an_oid_out_of_range_is_refused_and_a_negative_int4_wraps(pg: PgServer, db: str) -> None:
    answer = pg.http.exec("SELECT 4294967296::oid", db)
    assert answer.status_code == 400, answer.text
    assert "out of range for OID (0 to 4294967295)" in answer.json()["error"]
    assert pg.http.rows("SELECT (-1)::oid, '4294967295'::oid", db) == [[4294967295] * 2]


def test_binary_copy_of_a_query_writes_an_oid_in_four_bytes(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (a STRING PRIMARY KEY)", db)
    query = "SELECT oid, relname FROM pg_catalog.pg_class WHERE relname = 't'"
    with pg.connect(db) as conn:
        with conn.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT binary)") as copy:
            copy.set_types(["oid", "text"])
            rows = list(copy.rows())
    assert rows == [tuple(pg.http.rows(query, db)[0])]

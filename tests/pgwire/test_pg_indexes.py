"""The index relations of PostgreSQL's catalog (`pg_class` kind `i`, `pg_index`,
`pg_constraint`, `pg_get_indexdef`, `pg_get_constraintdef`) agree with the tables' real keys,
UNIQUE constraints and indexes, for any mix of them, read through psycopg."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hypothesis_settings import OVER_FIXTURE

COLUMNS = ("id", "a", "b", "Mixed")
# Names that clash with the names PostgreSQL gives keys and UNIQUE constraints.
TABLE_NAMES = ("t", "s", "t_pkey", "S_a_key")
INDEX_NAMES = ("t_pkey", "s_pkey", "t_a_key", "ix", "T_Id_Key", "s_b_a_key")


@dataclass(frozen=True)
class Table:
    name: str
    primary_key: tuple[str, ...]
    unique: tuple[tuple[str, ...], ...]
    indexes: tuple[tuple[str, tuple[str, ...], bool], ...]

    def statements(self) -> list[str]:
        parts = [f'"{c}" INT' for c in COLUMNS]
        if self.primary_key:
            parts.append(f"PRIMARY KEY ({_names(self.primary_key)})")
        parts += [f"UNIQUE ({_names(columns)})" for columns in self.unique]
        made = [f'CREATE TABLE "{self.name}" ({", ".join(parts)})']
        made += [
            f'CREATE {"UNIQUE " if unique else ""}INDEX "{name}" ON "{self.name}"'
            f" ({_names(columns)})"
            for name, columns, unique in self.indexes
        ]
        return made


def _names(columns: tuple[str, ...]) -> str:
    return ", ".join(f'"{c}"' for c in columns)


column_sets = st.lists(st.sampled_from(COLUMNS), min_size=1, max_size=3, unique=True).map(tuple)


@st.composite
def schemas(draw: st.DrawFn) -> list[Table]:
    names = draw(st.lists(st.sampled_from(TABLE_NAMES), min_size=1, max_size=3, unique=True))
    free_index_names = [n for n in INDEX_NAMES if n.lower() not in {t.lower() for t in names}]
    index_names = draw(st.permutations(free_index_names))
    tables = []
    for name in names:
        count = draw(st.integers(0, min(2, len(index_names))))
        declared = [
            (index_names.pop(), draw(column_sets), draw(st.booleans())) for _ in range(count)
        ]
        tables.append(
            Table(
                name,
                draw(st.one_of(st.just(()), column_sets)),
                tuple(draw(st.lists(column_sets, max_size=2))),
                tuple(declared),
            )
        )
    return tables


def _unquote(text: str) -> list[str]:
    return [c[1:-1].replace('""', '"') if c.startswith('"') else c for c in text.split(", ")]


@settings(OVER_FIXTURE, max_examples=25)
@given(schemas())
def test_the_index_catalog_agrees_with_the_tables(pg, tables):
    db = "t_" + uuid.uuid4().hex[:12]
    pg.http.sql(f"CREATE DATABASE {db}")
    try:
        for table in tables:
            for statement in table.statements():
                pg.http.sql(statement, db)
        with pg.connect(db) as conn:
            relations = conn.execute(
                "SELECT oid, relname, relkind FROM pg_catalog.pg_class"
            ).fetchall()
            attributes = conn.execute(
                "SELECT attrelid, attnum, attname FROM pg_catalog.pg_attribute"
            ).fetchall()
            indexes = conn.execute(
                "SELECT i.indexrelid, i.indrelid, i.indisprimary, i.indisunique, i.indkey,"
                " pg_catalog.pg_get_indexdef(i.indexrelid, 0, true) FROM pg_catalog.pg_index i"
            ).fetchall()
            constraints = conn.execute(
                "SELECT conname, contype, conrelid, conindid, conkey,"
                " pg_catalog.pg_get_constraintdef(oid, true) FROM pg_catalog.pg_constraint"
            ).fetchall()
    finally:
        pg.http.sql(f"DROP DATABASE {db}")

    # Every relation has a name and an OID of its own.
    assert len({name.lower() for _, name, _ in relations}) == len(relations)
    assert len({oid for oid, _, _ in relations}) == len(relations)
    kind = {oid: k for oid, _, k in relations}
    name_of = {oid: name for oid, name, _ in relations}
    column_of = {(rel, num): name for rel, num, name in attributes}

    for table in tables:
        [table_oid] = [oid for oid, name, k in relations if name == table.name and k == "r"]
        of_table = [row for row in indexes if row[1] == table_oid]
        assert len(of_table) == bool(table.primary_key) + len(table.unique) + len(table.indexes)
        assert sum(primary for _, _, primary, *_ in of_table) == bool(table.primary_key)
        seen = {name_of[oid]: (columns, unique) for oid, _, _, unique, columns, _ in of_table}
        for name, columns, unique in table.indexes:  # declared ones under their own names
            named = tuple(column_of[table_oid, int(n)] for n in seen[name][0].split())
            assert (named, seen[name][1]) == (columns, unique)

    for index_oid, table_oid, primary, unique, indkey, definition in indexes:
        assert (kind[index_oid], kind[table_oid]) == ("i", "r")
        from_key = [column_of[table_oid, int(n)] for n in indkey.split()]
        own = [column_of[index_oid, n + 1] for n in range(len(from_key))]
        shown = re.fullmatch(
            r"CREATE (UNIQUE )?INDEX (\S+) ON public\.(\S+) USING btree"
            r" \((.*)\)",
            definition,
        )
        assert shown is not None, definition
        assert _unquote(shown.group(4)) == from_key == own
        assert bool(shown.group(1)) == unique and (unique or not primary)
        assert _unquote(shown.group(2)) == [name_of[index_oid]]
        assert _unquote(shown.group(3)) == [name_of[table_oid]]

    keys = {row[0]: row for row in indexes}
    assert len(constraints) == sum(bool(t.primary_key) + len(t.unique) for t in tables)
    for name, contype, table_oid, index_oid, conkey, definition in constraints:
        _, indexed, primary, unique, indkey, _ = keys[index_oid]
        assert (name, table_oid, unique) == (name_of[index_oid], indexed, True)
        assert contype == ("p" if primary else "u")
        assert conkey == [int(n) for n in indkey.split()]  # an int2[], as from PostgreSQL
        columns = [column_of[table_oid, int(n)] for n in indkey.split()]
        kind_text = "PRIMARY KEY" if primary else "UNIQUE"
        assert definition.startswith(kind_text + " (")
        assert _unquote(definition[len(kind_text) + 2 : -1]) == columns


# pg_size_pretty's answers, as PostgreSQL 15 gives them for the same numbers.
PRETTY = {
    0: "0 bytes",
    10239: "10239 bytes",
    10240: "10 kB",
    10752: "11 kB",
    21474303: "20 MB",
    21474304: "20 MB",
    10**12: "931 GB",
    2**63 - 1: "8192 PB",
    -10753: "-11 kB",
    -(2**63): "-8192 PB",
}


def test_sizes_are_what_the_memory_limit_counts(pg, db):
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, v INT UNIQUE)", db)
    pg.http.sql("INSERT INTO t VALUES (1, 'a', 1), (2, 'bb', 2), (3, NULL, NULL)", db)
    counted = pg.http.get("/api/stats", params={"db": db}).json()
    table_bytes = counted["databases"][db]["memory"]["table_bytes"]
    with pg.connect(db) as conn:
        sizes = conn.execute(
            "SELECT c.relkind, pg_catalog.pg_table_size(c.oid),"
            " pg_catalog.pg_total_relation_size(c.oid), pg_catalog.pg_relation_size(c.oid)"
            " FROM pg_catalog.pg_class c WHERE c.relnamespace = 2200 ORDER BY c.relkind"
        ).fetchall()
        pretty = {
            n: conn.execute("SELECT pg_catalog.pg_size_pretty(%s::bigint)", (n,)).fetchone()[0]
            for n in PRETTY
        }
        nothing = conn.execute("SELECT pg_catalog.pg_table_size(1)").fetchone()[0]
    assert table_bytes > 0
    assert sizes == [
        ("i", None, None, None),
        ("i", None, None, None),
        ("r", table_bytes, table_bytes, table_bytes),
    ]
    assert pretty == PRETTY
    assert nothing is None


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT pg_catalog.pg_size_pretty('big')", "must be an integer, not 'big'"),
        ("SELECT pg_catalog.pg_get_indexdef(1, 'a', true)", "must be an integer, not 'a'"),
        ("SELECT * FROM pg_catalog.unnest('a b')", "'a b' is not an array"),
        ("SELECT * FROM pg_catalog.unnest(1)", "unnest() takes one array"),
    ],
)
def test_bad_arguments_are_a_clear_error(pg, db, sql, error):
    answer = pg.http.exec(sql, db)
    assert answer.status_code == 400 and error in answer.json()["error"], answer.text

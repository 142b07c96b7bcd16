"""Catalog relations whose rows are PostgreSQL's own and the same in every database: the
default btree operator class of each type a column here has (`pg_opclass`: an index
column's `pg_index.indclass`), and the two tablespaces (`pg_tablespace`), where everything
here is stored by PostgreSQL's reckoning (`pg_class.reltablespace` 0, the default); and
the catalog's own relations as `pg_class` lists them (`CATALOG_RELATIONS`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

Builder = Callable[["StatementContext", object], QueryOutput]
PG_CATALOG = 11
INFORMATION_SCHEMA = 13207  # the OID initdb gives the schema in PostgreSQL 15
BTREE_AM = 403
# The catalog relations this engine answers (`pg_catalog.RELATIONS`'s names) -> (OID,
# relkind), PostgreSQL 15's: a catalog table's OID is fixed in its sources, a system view's
# is the one initdb gives it. pg_class lists them in their schemas, as PostgreSQL does, so a
# client counting or listing relations (psql's \dS, pgjdbc's SYSTEM TABLE) finds them, and
# `'pg_class'::regclass` is the OID pg_class shows.
CATALOG_RELATIONS = {
    "pg_tablespace": (1213, "r"), "pg_type": (1247, "r"), "pg_attribute": (1249, "r"),
    "pg_proc": (1255, "r"), "pg_class": (1259, "r"), "pg_auth_members": (1261, "r"),
    "pg_database": (1262, "r"), "pg_sequence": (2224, "r"), "pg_am": (2601, "r"),
    "pg_attrdef": (2604, "r"), "pg_constraint": (2606, "r"), "pg_depend": (2608, "r"),
    "pg_description": (2609, "r"), "pg_index": (2610, "r"), "pg_inherits": (2611, "r"),
    "pg_namespace": (2615, "r"), "pg_opclass": (2616, "r"), "pg_rewrite": (2618, "r"),
    "pg_trigger": (2620, "r"), "pg_foreign_table": (3118, "r"), "pg_policy": (3256, "r"),
    "pg_partitioned_table": (3350, "r"), "pg_statistic_ext": (3381, "r"),
    "pg_collation": (3456, "r"), "pg_range": (3541, "r"), "pg_publication": (6104, "r"),
    "pg_publication_rel": (6106, "r"), "pg_publication_namespace": (6237, "r"),
    "pg_roles": (12000, "v"), "pg_user": (12014, "v"), "pg_publication_tables": (12068, "v"),
    "pg_replication_slots": (12257, "v"),
    "information_schema.columns": (13295, "v"),
    "information_schema.key_column_usage": (13329, "v"),
    "information_schema.schemata": (13382, "v"),
    "information_schema.table_constraints": (13411, "v"),
    "information_schema.tables": (13425, "v"), "information_schema.views": (13483, "v"),
}  # fmt: skip
# A type's OID -> its default btree operator class (OID, name, family), PostgreSQL 15's.
OPCLASSES = {16: (10003, "bool_ops", 424), 23: (1978, "int4_ops", 1976),
             20: (3124, "int8_ops", 1976), 701: (3123, "float8_ops", 1970),
             25: (3126, "text_ops", 1994), 1184: (3127, "timestamptz_ops", 434)}  # fmt: skip
# The types a client meets beside the column types' own (PostgreSQL 15's OIDs): the
# catalog's int2 and oid, its vectors, `name` and `timestamp` (the protocol's types of the
# session's names and LOCALTIMESTAMP: `Column.pg_type`), and the arrays of those and of each
# column type (what array_agg answers). A driver that reads an array by the catalog
# (asyncpg, pgjdbc) finds its element here. OID -> (typname, typlen, typcategory, typelem,
# typarray).
OTHER_TYPES = {
    21: ("int2", 2, "N", 0, 1005), 26: ("oid", 4, "N", 0, 1028),
    19: ("name", 64, "S", 0, 1003), 1114: ("timestamp", 8, "D", 0, 1115),
    1003: ("_name", -1, "A", 19, 0), 1115: ("_timestamp", -1, "A", 1114, 0),
    22: ("int2vector", -1, "A", 21, 1006), 30: ("oidvector", -1, "A", 26, 1013),
    1000: ("_bool", -1, "A", 16, 0), 1005: ("_int2", -1, "A", 21, 0),
    1006: ("_int2vector", -1, "A", 22, 0), 1007: ("_int4", -1, "A", 23, 0),
    1009: ("_text", -1, "A", 25, 0), 1013: ("_oidvector", -1, "A", 30, 0),
    1016: ("_int8", -1, "A", 20, 0), 1022: ("_float8", -1, "A", 701, 0),
    1028: ("_oid", -1, "A", 26, 0), 1185: ("_timestamptz", -1, "A", 1184, 0),
}  # fmt: skip


def _columns(spec: str) -> list[Column]:
    return [Column(name, kind) for name, _, kind in (i.partition(":") for i in spec.split())]


def relations(owner: int) -> dict[str, Builder]:
    """The relations by name; `owner` is the OID of the role that owns them (the admin)."""
    opclasses = QueryOutput(
        _columns(
            "oid:OID opcmethod:OID opcname:STRING opcnamespace:OID opcowner:OID"
            " opcfamily:OID opcintype:OID opcdefault:BOOLEAN opckeytype:OID"
        ),
        [
            (oid, BTREE_AM, name, PG_CATALOG, owner, family, type_oid, True, 0)
            for type_oid, (oid, name, family) in sorted(OPCLASSES.items())
        ],
    )
    tablespaces = QueryOutput(
        _columns("oid:OID spcname:STRING spcowner:OID spcacl:STRING spcoptions:STRING"),
        [(1663, "pg_default", owner, None, None), (1664, "pg_global", owner, None, None)],
    )
    # A fresh copy each read: a caller may keep or change the rows it is given.
    return {
        "pg_opclass": lambda c, v: QueryOutput(opclasses.columns, list(opclasses.rows)),
        "pg_tablespace": lambda c, v: QueryOutput(tablespaces.columns, list(tablespaces.rows)),
    }


def catalog_columns(
    context: StatementContext,
    relations: Mapping[str, Callable[..., QueryOutput]],
    own: list[Column],
) -> Iterator[tuple[int, int, Column]]:
    """(OID, number from 1, column) of each column of the catalog's own relations, as a read
    of each answers them (`relations`, pg_catalog's builders), but of one a table of the
    database hides; pg_attribute's are `own`, which it cannot build while building itself.
    Read with views left out (None): the columns do not depend on the rows."""
    for name, (oid, _) in CATALOG_RELATIONS.items():
        if name in context.database.tables:
            continue
        columns = own if name == "pg_attribute" else relations[name](context, None).columns
        for number, column in enumerate(columns, start=1):
            yield oid, number, column

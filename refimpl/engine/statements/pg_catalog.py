"""PostgreSQL's catalog relations, answered from this database's real catalog.

psql and drivers read `pg_catalog.pg_class`, `pg_namespace`, `pg_attribute`, `pg_type`,
`pg_database`, `pg_roles`, `pg_index`, `pg_constraint`, ... (the functions they call over
these rows, `pg_get_userbyid`, `format_type`, `pg_get_indexdef`, ..., are in `pg_functions`).
Every row here stands for a real table, index, view, constraint, column, type,
database or user: nothing is invented, and what this engine lacks (inheritance, policies,
foreign keys, publications, rules) is an empty relation.

Indexes: a table's PRIMARY KEY and each UNIQUE constraint are shown as the index and the
constraint PostgreSQL would make for them, under PostgreSQL's names (`t_pkey`, `t_a_b_key`);
a `CREATE [UNIQUE] INDEX` is an index under its own name, with no constraint.

Views (`pg_views`): relations of kind 'v' with the columns a read of them answers, for a
caller who may read them; their columns come from a shape run of their query, which
`queries` (it imports this module, so this one may not import it) hands in (`ViewColumns`).

OIDs: the two schemas and the types have PostgreSQL's own (`pg_catalog` 11, `public` 2200,
`int4` 23, ...); the admin user 10, as PostgreSQL's first superuser; tables, indexes, views,
other users and databases a number from their name (CRC-32, 16384 and up), stable while the name
stands; a constraint the number of its index; the catalog's own relations, listed in pg_class
too, PostgreSQL's (`pg_fixed.CATALOG_RELATIONS`). A query reads these relations only where no
table of the same name exists.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column
from refimpl.engine.rights import ADMIN_USER, Principal
from refimpl.engine.statements import information_schema, pg_fixed, replication_catalog
from refimpl.engine.statements.pg_fixed import (
    CATALOG_RELATIONS,
    INFORMATION_SCHEMA,
    OPCLASSES,
    OTHER_TYPES,
)
from refimpl.engine.statements.pg_views import ViewColumns, readable_views
from refimpl.engine.storage.schema import TableSchema
from refimpl.errors import Forbidden, Unauthorized
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

# A catalog relation's rows for a caller; `views` as `relation` takes it.
Builder = Callable[["StatementContext", "ViewColumns | None"], QueryOutput]

PG_CATALOG, PUBLIC = 11, 2200
HEAP_AM = 2
BTREE_AM = 403  # PostgreSQL's ordered index; this engine's indexes are sorted entries too
SERVER_VERSION = "PostgreSQL 15.0 (refimpl)"
# Column type -> (OID, typname, typlen, format_type's name).
TYPES: dict[str, tuple[int, str, int, str]] = {
    "BOOLEAN": (16, "bool", 1, "boolean"),
    "INT": (23, "int4", 4, "integer"),
    "BIGINT": (20, "int8", 8, "bigint"),
    "DOUBLE": (701, "float8", 8, "double precision"),
    "STRING": (25, "text", -1, "text"),
    "SYMBOL": (25, "text", -1, "text"),
    "TIMESTAMP": (1184, "timestamptz", 8, "timestamp with time zone"),
}
FORMAT_TYPE = {oid: shown for oid, _, _, shown in TYPES.values()} | {
    0: "-",
    21: "smallint",
    26: "oid",
    19: "name",
    1114: "timestamp without time zone",
    22: "int2vector",
    30: "oidvector",
}
# An array type's name is its element's with `[]`, as format_type writes it (`bigint[]`).
FORMAT_TYPE |= {
    oid: f"{FORMAT_TYPE[element]}[]"
    for oid, (name, _, _, element, _) in OTHER_TYPES.items()
    if name.startswith("_")
}


def name_oid(name: str) -> int:
    """The OID of a table, user or database named `name`."""
    return 16384 + zlib.crc32(name.lower().encode("utf-8")) % (2**31 - 16384)


def role_oid(name: str) -> int:
    return 10 if name.lower() == ADMIN_USER else name_oid(name)


def _columns(spec: str) -> list[Column]:
    """`"oid:OID relname:STRING"` -> columns (a new list, of columns made once a spec)."""
    return list(_spec_columns(spec))


@functools.lru_cache(maxsize=256)  # the specs are this module's constants
def _spec_columns(spec: str) -> tuple[Column, ...]:
    return tuple(Column(name, kind) for name, _, kind in (i.partition(":") for i in spec.split()))


def readable_tables(context: StatementContext) -> list[TableSchema]:
    """The schemas of the tables the caller may read, by name."""
    database = context.database
    with database.state_lock:
        tables = sorted(database.tables.values(), key=lambda t: t.schema.name.lower())
    return [t.schema for t in tables if context.can_read(t.schema.name)]


# --- indexes and the constraints they enforce -------------------------------------------------


def quote_name(name: str) -> str:
    """An identifier as PostgreSQL writes it: bare when lower case, else in double quotes."""
    if re.fullmatch(r"[a-z_][a-z0-9_$]*", name):
        return name
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True, slots=True)
class IndexRelation:
    """One index of a table as PostgreSQL's catalog shows it: a primary key's (`contype`
    'p'), a UNIQUE constraint's ('u') or a declared `CREATE [UNIQUE] INDEX` (None)."""

    name: str
    table: TableSchema
    columns: tuple[str, ...]  # spelled as the table spells them
    unique: bool
    contype: str | None

    @property
    def oid(self) -> int:
        return name_oid(self.name)

    def attnums(self) -> list[int]:
        return [self.table.position(c) + 1 for c in self.columns]

    def types(self) -> list[str]:
        return [self.table.type_of(c) for c in self.columns]

    def definition(self) -> str:
        """`pg_get_indexdef(oid)`: the statement that makes the index in PostgreSQL."""
        unique = "UNIQUE " if self.unique else ""
        columns = ", ".join(quote_name(c) for c in self.columns)
        return (
            f"CREATE {unique}INDEX {quote_name(self.name)} ON public.{quote_name(self.table.name)}"
            f" USING btree ({columns})"
        )

    def constraint_definition(self) -> str | None:
        """`pg_get_constraintdef(oid)`: the constraint's clause; None for a declared index."""
        if self.contype is None:
            return None
        kind = "PRIMARY KEY" if self.contype == "p" else "UNIQUE"
        return f"{kind} ({', '.join(quote_name(c) for c in self.columns)})"


def _free_name(wanted: str, taken: set[str]) -> str:
    """`wanted`, or with the first number that makes it free (PostgreSQL's `t_pkey1`)."""
    name, number = wanted, 0
    while name.lower() in taken:
        number += 1
        name = f"{wanted}{number}"
    taken.add(name.lower())
    return name


def _constraint_like(name: str) -> bool:
    return re.search(r"_(p?key)[0-9]*$", name) is not None


def catalog_indexes(context: StatementContext, views: ViewColumns | None) -> list[IndexRelation]:
    """The indexes of the tables the caller may read, each table's primary key first, then
    its UNIQUE constraints, then its declared indexes. A constraint's name is PostgreSQL's,
    numbered when one of those tables, their declared indexes or the views the caller may
    read has it: a relation the caller may not read leaves no trace, not even in a number."""
    schemas = readable_tables(context)
    taken = {s.name.lower() for s in schemas} | {i.name.lower() for s in schemas for i in s.indexes}
    # Only a view named as a constraint's index could be (`t_pkey`, `t_a_key`, numbered).
    taken |= {v.name.lower() for v in readable_views(context, views, _constraint_like)}
    found: list[IndexRelation] = []
    for schema in schemas:

        def spelled(names: tuple[str, ...], schema: TableSchema = schema) -> tuple[str, ...]:
            return tuple(schema.columns[schema.position(n)].name for n in names)

        if schema.primary_key:
            name = _free_name(f"{schema.name}_pkey", taken)
            found.append(IndexRelation(name, schema, spelled(schema.primary_key), True, "p"))
        for columns in schema.unique:
            columns = spelled(columns)
            name = _free_name(f"{schema.name}_{'_'.join(columns)}_key", taken)
            found.append(IndexRelation(name, schema, columns, True, "u"))
        found += [
            IndexRelation(i.name, schema, spelled(i.columns), i.unique, None)
            for i in schema.indexes
        ]
    return found


def _vector(numbers: Sequence[int]) -> str:
    """PostgreSQL's text of an int2vector: numbers separated by spaces."""
    return " ".join(str(n) for n in numbers)


def _pg_index(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "indexrelid:OID indrelid:OID indnatts:INT indnkeyatts:INT indisunique:BOOLEAN"
        " indnullsnotdistinct:BOOLEAN indisprimary:BOOLEAN indisexclusion:BOOLEAN"
        " indimmediate:BOOLEAN indisclustered:BOOLEAN indisvalid:BOOLEAN"
        " indcheckxmin:BOOLEAN indisready:BOOLEAN indislive:BOOLEAN indisreplident:BOOLEAN"
        " indkey:INT2VECTOR indcollation:OIDVECTOR indclass:OIDVECTOR indoption:INT2VECTOR"
        " indexprs:STRING indpred:STRING"
    )
    # Every index is valid and checked at once (UNIQUE at each statement); NULLs are
    # distinct and sort last, PostgreSQL's default order (indoption 0).
    rows = [
        (
            i.oid,
            name_oid(i.table.name),
            len(i.columns),
            len(i.columns),
            i.unique,
            False,
            i.contype == "p",
            False,
            True,
            False,
            True,
            False,
            True,
            True,
            False,
            _vector(i.attnums()),
            _vector([100 if TYPES[t][0] == 25 else 0 for t in i.types()]),  # text: "default"
            _vector([OPCLASSES[TYPES[t][0]][0] for t in i.types()]),
            _vector([0] * len(i.columns)),
            None,
            None,
        )
        for i in catalog_indexes(context, views)
    ]
    return QueryOutput(columns, rows)


def _pg_constraint(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "oid:OID conname:STRING connamespace:OID contype:STRING condeferrable:BOOLEAN"
        " condeferred:BOOLEAN convalidated:BOOLEAN conrelid:OID contypid:OID"
        " conindid:OID conparentid:OID confrelid:OID conislocal:BOOLEAN"
        " coninhcount:INT connoinherit:BOOLEAN conkey:INT[] confkey:INT[] conbin:STRING"
    )
    rows = [
        (
            i.oid,
            i.name,
            PUBLIC,
            i.contype,
            False,
            False,
            True,
            name_oid(i.table.name),
            0,
            i.oid,
            0,
            0,
            True,
            0,
            True,
            "{" + ",".join(map(str, i.attnums())) + "}",
            None,
            None,
        )
        for i in catalog_indexes(context, views)
        if i.contype is not None
    ]
    return QueryOutput(columns, rows)


def catalog_users(context: StatementContext) -> list[tuple[str, bool]]:
    try:
        shown = context.access.execute(ast.ShowUsers(), context.principal, context.database.name)
    except (Forbidden, Unauthorized):
        principal = context.principal  # not an admin: only the caller's own role
        return [(principal.name, principal.is_admin)] if principal.name else []
    return [(row[0], bool(row[1])) for row in shown.rows]


def _pg_class(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "oid:OID relname:STRING relnamespace:OID relkind:STRING relowner:OID"
        " relam:OID relchecks:INT relhasindex:BOOLEAN relhasrules:BOOLEAN"
        " relhastriggers:BOOLEAN relrowsecurity:BOOLEAN relforcerowsecurity:BOOLEAN"
        " relispartition:BOOLEAN reltablespace:OID reloftype:OID"
        " relpersistence:STRING relreplident:STRING reltoastrelid:OID reltuples:DOUBLE"
        " relpartbound:STRING reloptions:STRING reltype:OID relpages:INT"
    )
    owner = role_oid(ADMIN_USER)
    indexes = catalog_indexes(context, views)
    indexed = {i.table.name.lower() for i in indexes}
    rows = [
        _class_row(
            name_oid(s.name),
            s.name,
            "r",
            owner,
            HEAP_AM,
            s.name.lower() in indexed,
            "f" if s.replica_identity_full else "d",
        )
        for s in readable_tables(context)
    ]
    rows += [_class_row(i.oid, i.name, "i", owner, BTREE_AM) for i in indexes]
    # A view has no storage, so no access method, and no rules: it is no rule here.
    rows += [
        _class_row(name_oid(v.name), v.name, "v", owner) for v in readable_views(context, views)
    ]
    # The catalog's own relations, for every caller (as PostgreSQL shows them to any role),
    # but one a table of the database hides (`relation`).
    for name, (oid, kind) in CATALOG_RELATIONS.items():
        if is_relation(context, name):
            schema, _, relname = name.rpartition(".")
            namespace = INFORMATION_SCHEMA if schema else PG_CATALOG
            method = HEAP_AM if kind == "r" else 0
            rows.append(_class_row(oid, relname, kind, owner, method, namespace=namespace))
    return QueryOutput(columns, rows)


def _class_row(
    oid: int,
    name: str,
    kind: str,
    owner: int,
    access_method: int = 0,
    has_index: bool = False,
    replica_identity: str = "n",
    namespace: int = PUBLIC,
) -> tuple[object, ...]:
    """A pg_class row of a relation in `namespace`. The rest is alike for every relation here:
    no checks, rules, triggers, row security or partitions, the default tablespace, no type
    of its own, permanent, no TOAST table, reltuples -1 (never analyzed), no partition bound
    or options; reltype 0 (no relation here has a composite type of its rows) and relpages
    0, as in PostgreSQL before a relation is first vacuumed (no page count is kept here)."""
    return (
        oid,
        name,
        namespace,
        kind,
        owner,
        access_method,
        0,
        has_index,
        False,
        False,
        False,
        False,
        False,
        0,
        0,
        "p",
        replica_identity,
        0,
        -1.0,
        None,
        None,
        0,
        0,
    )


def _pg_namespace(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    owner = role_oid(ADMIN_USER)
    return QueryOutput(
        _columns("oid:OID nspname:STRING nspowner:OID"),
        [
            (PG_CATALOG, "pg_catalog", owner),
            (PUBLIC, "public", owner),
            (INFORMATION_SCHEMA, "information_schema", owner),
        ],
    )


def _pg_attribute(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "attrelid:OID attname:STRING atttypid:OID atttypmod:INT attnum:INT"
        " attnotnull:BOOLEAN atthasdef:BOOLEAN attisdropped:BOOLEAN attcollation:OID"
        " attidentity:STRING attgenerated:STRING attlen:INT attstorage:STRING"
        " attcompression:STRING attstattarget:INT"
    )
    rows = []
    for schema in readable_tables(context):
        relid = name_oid(schema.name)
        keys = {k.lower() for k in schema.primary_key}
        for number, column in enumerate(schema.columns, start=1):
            not_null = column.name.lower() in keys
            rows.append(_attribute_row(relid, column.name, column.type, number, not_null))
    for index in catalog_indexes(context, views):  # an index's columns are attributes of its own
        for number, name in enumerate(index.columns, start=1):
            rows.append(_attribute_row(index.oid, name, index.table.type_of(name), number))
    for view in readable_views(context, views):  # the columns a read of the view answers
        for number, view_column in enumerate(view.columns, start=1):
            relid = name_oid(view.name)
            kind = view_column.pg_type or view_column.type  # `name` where PostgreSQL says so
            typmod = view_column.pg_typmod  # a column of LOCALTIMESTAMP(3): 3
            rows.append(_attribute_row(relid, view_column.name, kind, number, False, typmod))
    for relid, number, answered in pg_fixed.catalog_columns(context, RELATIONS, columns):
        rows.append(_attribute_row(relid, answered.name, answered.type, number))  # \d pg_class
    return QueryOutput(columns, rows)


def _storage(size: int) -> str:
    """The type's `typstorage` in PostgreSQL: plain when of fixed size, else extended."""
    return "p" if size > 0 else "x"


def _attribute_row(
    relid: int, name: str, column_type: str, number: int, not_null: bool = False, typmod: int = -1
) -> tuple[object, ...]:
    """A pg_attribute row of the column `number` of a relation: no default, not dropped, no
    collation, identity or generation, the type's length and storage, the default
    statistics target."""
    oid, size = _type_oid_size(column_type)
    return (
        relid,
        name,
        oid,
        typmod,
        number,
        not_null,
        False,
        False,
        0,
        "",
        "",
        size,
        _storage(size),
        "",
        -1,
    )


# The types a view's column may have beside the column types (TYPES): the catalog's, and
# the `Column.pg_type`s.
_CATALOG_TYPE_OIDS = {"OID": 26, "INT2VECTOR": 22, "OIDVECTOR": 30, "name": 19, "timestamp": 1114}


def _type_oid_size(column_type: str) -> tuple[int, int]:
    """The OID and `typlen` of a column type's PostgreSQL type: a column type's, the
    catalog's OID and vectors, or an array of one of those (`_int4`, `_oid`)."""
    if column_type in TYPES:
        oid, _, size, _ = TYPES[column_type]
        return oid, size
    if column_type.endswith("[]"):
        element, _ = _type_oid_size(column_type[:-2])
        extra = _TYPE_EXTRA.get(element)
        return (extra[0] if extra else OTHER_TYPES[element][4]), -1
    oid = _CATALOG_TYPE_OIDS[column_type]
    return oid, OTHER_TYPES[oid][1]


# A type's OID -> (its array type's OID, typcategory), as in PostgreSQL.
_TYPE_EXTRA = {16: (1000, "B"), 23: (1007, "N"), 20: (1016, "N"), 701: (1022, "N"),
               25: (1009, "S"), 1184: (1185, "D")}  # fmt: skip


def _pg_type(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    owner = role_oid(ADMIN_USER)
    kinds = {oid: (name, size, _TYPE_EXTRA[oid][1], 0, _TYPE_EXTRA[oid][0])
             for oid, name, size, _ in TYPES.values()}  # fmt: skip
    rows = sorted(
        (oid, name, PG_CATALOG, owner, size, 0 < size <= 8, "b", category, True, ",", 0, element,
         array, 0, -1, False, 100 if 25 in (oid, element) else 0, None, None)
        for oid, (name, size, category, element, array) in (kinds | OTHER_TYPES).items()
    )  # fmt: skip
    return QueryOutput(
        _columns(
            "oid:OID typname:STRING typnamespace:OID typowner:OID typlen:INT"
            " typbyval:BOOLEAN typtype:STRING typcategory:STRING typisdefined:BOOLEAN"
            " typdelim:STRING typrelid:OID typelem:OID typarray:OID"
            " typbasetype:OID typtypmod:INT typnotnull:BOOLEAN typcollation:OID"
            " typdefault:STRING typacl:STRING"
        ),
        rows,
    )


def _pg_database(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "oid:OID datname:STRING datdba:OID encoding:INT datcollate:STRING"
        " datctype:STRING daticulocale:STRING datlocprovider:STRING datacl:STRING"
        " datallowconn:BOOLEAN"
    )
    owner = role_oid(ADMIN_USER)
    rows = [
        (name_oid(name), name, owner, 6, "C", "C", None, "c", None, True)
        for name in context.catalog.database_names()
        if _may_see_database(context, name)
    ]
    return QueryOutput(columns, rows)


def _may_see_database(context: StatementContext, name: str) -> bool:
    """Rights before existence: a reader is shown the databases it holds a right in."""
    try:
        context.access.check_any(context.principal, name)
    except (Forbidden, Unauthorized):
        return False
    return True


def _pg_roles(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
    columns = _columns(
        "oid:OID rolname:STRING rolsuper:BOOLEAN rolinherit:BOOLEAN rolcreaterole:BOOLEAN"
        " rolcreatedb:BOOLEAN rolcanlogin:BOOLEAN rolconnlimit:INT rolvaliduntil:TIMESTAMP"
        " rolreplication:BOOLEAN rolbypassrls:BOOLEAN"
    )
    may_replicate = context.access.may_replicate  # the REPLICATION right (spec: replication)
    rows = [
        (role_oid(n), n, a, True, a, a, True, -1, None, may_replicate(Principal(n, a)), a)
        for n, a in catalog_users(context)
    ]
    return QueryOutput(columns, rows)


def _empty(spec: str) -> Builder:
    return lambda context, views: QueryOutput(_columns(spec), [])


RELATIONS: dict[str, Builder] = {
    "pg_class": _pg_class,
    "pg_namespace": _pg_namespace,
    "pg_attribute": _pg_attribute,
    "pg_type": _pg_type,
    "pg_database": _pg_database,
    "pg_roles": _pg_roles,
    "pg_user": lambda c, v: QueryOutput(_columns("usename:STRING usesysid:OID usesuper:BOOLEAN"),
                                     [(n, role_oid(n), a) for n, a in catalog_users(c)]),
    "pg_am": lambda c, v: QueryOutput(_columns("oid:OID amname:STRING amtype:STRING"),
                                   [(HEAP_AM, "heap", "t"), (BTREE_AM, "btree", "i")]),
    "pg_index": _pg_index,
    "pg_constraint": _pg_constraint,
    # What this engine does not have: no rows.
    "pg_auth_members": _empty("roleid:OID member:OID grantor:OID"),
    "pg_inherits": _empty("inhrelid:OID inhparent:OID inhseqno:INT"
                          " inhdetachpending:BOOLEAN"),
    "pg_description": _empty("objoid:OID classoid:OID objsubid:INT description:STRING"),
    "pg_attrdef": _empty("oid:OID adrelid:OID adnum:INT adbin:STRING"),
    # Functions and procedures: their rows are not shown yet (psql's \df lists none).
    "pg_proc": _empty("oid:OID proname:STRING pronamespace:OID proowner:OID"
                      " prokind:STRING prorettype:OID proargtypes:OIDVECTOR proretset:BOOLEAN"
                      " pronargs:INT prosrc:STRING prolang:OID proargnames:STRING[]"
                      " proallargtypes:OID[] proargmodes:STRING[] proargdefaults:STRING"),
    "pg_depend": _empty("classid:OID objid:OID objsubid:INT refclassid:OID"
                        " refobjid:OID refobjsubid:INT deptype:STRING"),
    "pg_sequence": _empty("seqrelid:OID seqtypid:OID seqstart:BIGINT"
                          " seqincrement:BIGINT seqmax:BIGINT seqmin:BIGINT seqcache:BIGINT"
                          " seqcycle:BOOLEAN"),
    "pg_collation": _empty("oid:OID collname:STRING collnamespace:OID"),
    "pg_policy": _empty("oid:OID polname:STRING polrelid:OID polpermissive:BOOLEAN"
                        " polroles:STRING polqual:STRING polwithcheck:STRING polcmd:STRING"),
    "pg_statistic_ext": _empty("oid:OID stxrelid:OID stxname:STRING"
                               " stxnamespace:OID stxkind:STRING stxstattarget:INT"),
    "pg_publication": _empty("oid:OID pubname:STRING puballtables:BOOLEAN"),
    "pg_publication_rel": _empty("oid:OID prpubid:OID prrelid:OID prqual:STRING"
                                 " prattrs:STRING"),
    "pg_publication_namespace": _empty("oid:OID pnpubid:OID pnnspid:OID"),
    "pg_trigger": _empty("oid:OID tgrelid:OID tgname:STRING"),
    "pg_rewrite": _empty("oid:OID ev_class:OID rulename:STRING"),
    "pg_partitioned_table": _empty("partrelid:OID partstrat:STRING"),
    "pg_foreign_table": _empty("ftrelid:OID ftserver:OID"),
    "pg_range": _empty("rngtypid:OID rngsubtype:OID rngmultitypid:OID"),
}  # fmt: skip
# Logical replication's slots and publications (they replace pg_publication's empty rows).
RELATIONS.update(replication_catalog.relations(name_oid, role_oid))
# PostgreSQL's own rows, the same in every database (operator classes, tablespaces).
RELATIONS.update(pg_fixed.relations(role_oid(ADMIN_USER)))
# SQL's information_schema views, over the same rows as the relations above.
RELATIONS.update(information_schema.relations(readable_tables, catalog_indexes))


def relation(context: StatementContext, name: str, views: ViewColumns | None) -> QueryOutput | None:
    """The catalog relation `name` (lower case), or None: no such relation, or a table of
    the database has that name. `views` knows the columns of a view as the caller reads it
    (None: the views are left out, for a shape run, whose rows nobody reads)."""
    build = RELATIONS.get(name)
    if build is None or name in context.database.tables:
        return None
    return build(context, views)


def is_relation(context: StatementContext, name: str) -> bool:
    return name in RELATIONS and name not in context.database.tables

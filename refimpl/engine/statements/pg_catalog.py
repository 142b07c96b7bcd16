"""PostgreSQL's catalog relations and functions, answered from this database's real catalog.

psql and drivers read `pg_catalog.pg_class`, `pg_namespace`, `pg_attribute`, `pg_type`,
`pg_database`, `pg_roles`, ... and call `pg_get_userbyid`, `format_type`,
`pg_table_is_visible`, `current_schema()`, `version()`. Every row here stands for a real
table, column, type, database or user: nothing is invented, and what this engine lacks
(indexes of their own, constraints, inheritance, policies) is an empty relation.

OIDs: the two schemas and the types have PostgreSQL's own (`pg_catalog` 11, `public` 2200,
`int4` 23, ...); the admin user 10, as PostgreSQL's first superuser; tables, other users and
databases a number from their name (CRC-32, 16384 and up), stable while the name stands.
A query reads these relations only where no table of the same name exists.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.arrays import array_upper
from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.engine.query.expressions import compile_expression, constant_value
from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column
from refimpl.engine.rights import ADMIN_USER
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import Forbidden, InvalidValue, SqlError, Unauthorized
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import ScalarFunction, StatementContext

PG_CATALOG, PUBLIC = 11, 2200
HEAP_AM = 2
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
_FORMAT_TYPE = {oid: shown for oid, _, _, shown in TYPES.values()}


def name_oid(name: str) -> int:
    """The OID of a table, user or database named `name`."""
    return 16384 + zlib.crc32(name.lower().encode("utf-8")) % (2**31 - 16384)


def role_oid(name: str) -> int:
    return 10 if name.lower() == ADMIN_USER else name_oid(name)


def _columns(spec: str) -> list[Column]:
    """`"oid:BIGINT relname:STRING"` -> columns."""
    return [Column(*item.split(":")) for item in spec.split()]


def _readable_tables(context: StatementContext) -> list[Any]:
    database = context.database
    with database.state_lock:
        tables = sorted(database.tables.values(), key=lambda t: t.schema.name.lower())
    return [t.schema for t in tables if context.can_read(t.schema.name)]


def _users(context: StatementContext) -> list[tuple[str, bool]]:
    try:
        shown = context.access.execute(ast.ShowUsers(), context.principal, context.database.name)
    except (Forbidden, Unauthorized):
        principal = context.principal  # not an admin: only the caller's own role
        return [(principal.name, principal.is_admin)] if principal.name else []
    return [(row[0], bool(row[1])) for row in shown.rows]


def _pg_class(context: StatementContext) -> QueryOutput:
    columns = _columns(
        "oid:BIGINT relname:STRING relnamespace:BIGINT relkind:STRING relowner:BIGINT"
        " relam:BIGINT relchecks:INT relhasindex:BOOLEAN relhasrules:BOOLEAN"
        " relhastriggers:BOOLEAN relrowsecurity:BOOLEAN relforcerowsecurity:BOOLEAN"
        " relispartition:BOOLEAN reltablespace:BIGINT reloftype:BIGINT"
        " relpersistence:STRING relreplident:STRING reltoastrelid:BIGINT reltuples:DOUBLE"
        " relpartbound:STRING"
    )
    owner = role_oid(ADMIN_USER)
    rows = [(name_oid(s.name), s.name, PUBLIC, "r", owner, HEAP_AM, 0, False, False, False,
             False, False, False, 0, 0, "p", "d", 0, -1.0, None)
            for s in _readable_tables(context)]  # fmt: skip
    return QueryOutput(columns, rows)


def _pg_namespace(context: StatementContext) -> QueryOutput:
    owner = role_oid(ADMIN_USER)
    return QueryOutput(_columns("oid:BIGINT nspname:STRING nspowner:BIGINT"),
                       [(PG_CATALOG, "pg_catalog", owner), (PUBLIC, "public", owner)])


def _pg_attribute(context: StatementContext) -> QueryOutput:
    columns = _columns(
        "attrelid:BIGINT attname:STRING atttypid:BIGINT atttypmod:INT attnum:INT"
        " attnotnull:BOOLEAN atthasdef:BOOLEAN attisdropped:BOOLEAN attcollation:BIGINT"
        " attidentity:STRING attgenerated:STRING attlen:INT"
    )
    rows = []
    for schema in _readable_tables(context):
        relid = name_oid(schema.name)
        keys = {k.lower() for k in schema.primary_key}
        for number, column in enumerate(schema.columns, start=1):
            oid, _, size, _ = TYPES[column.type]
            rows.append((relid, column.name, oid, -1, number, column.name.lower() in keys,
                         False, False, 0, "", "", size))  # fmt: skip
    return QueryOutput(columns, rows)


def _pg_type(context: StatementContext) -> QueryOutput:
    rows = sorted({(oid, name, PG_CATALOG, size, 0) for oid, name, size, _ in TYPES.values()})
    return QueryOutput(
        _columns("oid:BIGINT typname:STRING typnamespace:BIGINT typlen:INT typcollation:BIGINT"),
        rows)  # fmt: skip


def _pg_database(context: StatementContext) -> QueryOutput:
    columns = _columns(
        "oid:BIGINT datname:STRING datdba:BIGINT encoding:INT datcollate:STRING"
        " datctype:STRING daticulocale:STRING datlocprovider:STRING datacl:STRING"
        " datallowconn:BOOLEAN"
    )
    owner = role_oid(ADMIN_USER)
    rows = [(name_oid(name), name, owner, 6, "C", "C", None, "c", None, True)
            for name in context.catalog.database_names()]  # fmt: skip
    return QueryOutput(columns, rows)


def _pg_roles(context: StatementContext) -> QueryOutput:
    columns = _columns(
        "oid:BIGINT rolname:STRING rolsuper:BOOLEAN rolinherit:BOOLEAN rolcreaterole:BOOLEAN"
        " rolcreatedb:BOOLEAN rolcanlogin:BOOLEAN rolconnlimit:INT rolvaliduntil:TIMESTAMP"
        " rolreplication:BOOLEAN rolbypassrls:BOOLEAN"
    )
    rows = [(role_oid(name), name, admin, True, admin, admin, True, -1, None, False, admin)
            for name, admin in _users(context)]  # fmt: skip
    return QueryOutput(columns, rows)


def _empty(spec: str) -> Callable[[StatementContext], QueryOutput]:
    return lambda context: QueryOutput(_columns(spec), [])


RELATIONS: dict[str, Callable[[StatementContext], QueryOutput]] = {
    "pg_class": _pg_class,
    "pg_namespace": _pg_namespace,
    "pg_attribute": _pg_attribute,
    "pg_type": _pg_type,
    "pg_database": _pg_database,
    "pg_roles": _pg_roles,
    "pg_user": lambda c: QueryOutput(_columns("usename:STRING usesysid:BIGINT usesuper:BOOLEAN"),
                                     [(n, role_oid(n), a) for n, a in _users(c)]),
    "pg_am": lambda c: QueryOutput(_columns("oid:BIGINT amname:STRING amtype:STRING"),
                                   [(HEAP_AM, "heap", "t")]),
    # What this engine does not have: no rows.
    "pg_auth_members": _empty("roleid:BIGINT member:BIGINT grantor:BIGINT"),
    "pg_index": _empty("indexrelid:BIGINT indrelid:BIGINT indisprimary:BOOLEAN"
                       " indisunique:BOOLEAN"),
    "pg_constraint": _empty("oid:BIGINT conname:STRING conrelid:BIGINT contype:STRING"),
    "pg_inherits": _empty("inhrelid:BIGINT inhparent:BIGINT inhseqno:INT"
                          " inhdetachpending:BOOLEAN"),
    "pg_description": _empty("objoid:BIGINT classoid:BIGINT objsubid:INT description:STRING"),
    "pg_attrdef": _empty("oid:BIGINT adrelid:BIGINT adnum:INT adbin:STRING"),
    "pg_collation": _empty("oid:BIGINT collname:STRING collnamespace:BIGINT"),
    "pg_policy": _empty("oid:BIGINT polname:STRING polrelid:BIGINT polpermissive:BOOLEAN"
                        " polroles:STRING polqual:STRING polwithcheck:STRING polcmd:STRING"),
    "pg_statistic_ext": _empty("oid:BIGINT stxrelid:BIGINT stxname:STRING"
                               " stxnamespace:BIGINT stxkind:STRING stxstattarget:INT"),
    "pg_publication": _empty("oid:BIGINT pubname:STRING puballtables:BOOLEAN"),
    "pg_publication_rel": _empty("oid:BIGINT prpubid:BIGINT prrelid:BIGINT prqual:STRING"
                                 " prattrs:STRING"),
    "pg_publication_namespace": _empty("oid:BIGINT pnpubid:BIGINT pnnspid:BIGINT"),
    "pg_trigger": _empty("oid:BIGINT tgrelid:BIGINT tgname:STRING"),
    "pg_rewrite": _empty("oid:BIGINT ev_class:BIGINT rulename:STRING"),
    "pg_partitioned_table": _empty("partrelid:BIGINT partstrat:STRING"),
    "pg_foreign_table": _empty("ftrelid:BIGINT ftserver:BIGINT"),
}  # fmt: skip


def relation(context: StatementContext, name: str) -> QueryOutput | None:
    """The catalog relation `name` (lower case), or None: no such relation, or a table of
    the database has that name."""
    build = RELATIONS.get(name)
    if build is None or name in context.database.tables:
        return None
    return build(context)


def is_relation(context: StatementContext, name: str) -> bool:
    return name in RELATIONS and name not in context.database.tables


# --- functions ------------------------------------------------------------------------------


def _function(context: StatementContext, arity: Sequence[int], result: str,
              compute: Callable[..., Any]) -> ScalarFunction:  # fmt: skip
    def build(call: ast.FuncCall, scope: Scope) -> Compiled:
        if len(call.args) not in arity:
            counts = " or ".join(str(n) for n in arity)
            raise SqlError(f"{call.name}() takes {counts} argument(s)")
        args = [compile_expression(a, scope).fn for a in call.args]

        def run(row: Sequence[Any]) -> Any:
            return compute(*[arg(row) for arg in args])

        return Compiled(run, result)

    return build


def functions(context: StatementContext) -> dict[str, ScalarFunction]:
    """The catalog functions psql and drivers call, bound to `context`."""

    def user_by_id(oid: Any) -> str | None:
        names = {role_oid(name): name for name, _ in _users(context)}
        return None if oid is None else names.get(oid, f"unknown (OID={oid})")

    def format_type(oid: Any, typmod: Any = None) -> str | None:
        return None if oid is None else _FORMAT_TYPE.get(oid, "???")

    return {
        "pg_get_userbyid": _function(context, (1,), "STRING", user_by_id),
        "format_type": _function(context, (2,), "STRING", format_type),
        "pg_table_is_visible": _function(context, (1,), "BOOLEAN",
                                         lambda oid: None if oid is None else True),
        "pg_encoding_to_char": _function(context, (1,), "STRING",
                                         lambda n: None if n is None else "UTF8"),
        "array_to_string": _function(context, (2, 3), "STRING",
                                     lambda array, *rest: None if array is None else array),
        # Column defaults, constraints and index definitions: none exist, so none is shown.
        "pg_get_expr": _function(context, (2, 3), "STRING", lambda *args: None),
        "pg_get_constraintdef": _function(context, (1, 2), "STRING", lambda *args: None),
        "pg_get_indexdef": _function(context, (1, 3), "STRING", lambda *args: None),
        "pg_get_statisticsobjdef_columns": _function(context, (1,), "STRING",
                                                     lambda *args: None),
        "array_upper": _function(context, (2,), "BIGINT", array_upper),
        # Every table here is an ordinary one, which PostgreSQL could publish.
        "pg_relation_is_publishable": _function(context, (1,), "BOOLEAN",
                                                lambda oid: None if oid is None else True),
        "current_schema": _function(context, (0,), "STRING", lambda: "public"),
        "current_database": _function(context, (0,), "STRING",
                                      lambda: context.database.name),
        "current_user": _function(context, (0,), "STRING", lambda: context.principal.name),
        "version": _function(context, (0,), "STRING", lambda: SERVER_VERSION),
    }  # fmt: skip


# --- table functions ------------------------------------------------------------------------


@dataclass(slots=True)
class _Series:
    """The rows of `generate_series(start, stop [, step])`: one BIGINT column, named as the
    function or its alias (`generate_series(1, 3) s` has the column `s`, as in PostgreSQL)."""

    columns: list[Column]
    qualifier: str | None
    numbers: range
    schema: None = None

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return ((n,) for n in self.numbers)


def generate_series(context: StatementContext, source: ast.FunctionSource, select: ast.Select,
                    params: Sequence[Any]) -> _Series:  # fmt: skip
    """The integers from start to stop (both included) by step (1 by default); no rows when
    an argument is NULL. psql's catalog queries read it."""
    scope = Scope(columns=[], params=params)
    bounds = [constant_value(arg, scope) for arg in source.args]
    if len(bounds) not in (2, 3) or any(
            isinstance(b, bool) or not isinstance(b, int | None) for b in bounds):
        raise SqlError("generate_series() takes two or three integers: start, stop [, step]")
    start, stop, step = (*bounds, 1)[:3]
    if step == 0:
        raise InvalidValue("the step of generate_series() must not be zero")
    name = source.alias or source.name
    if start is None or stop is None or step is None:
        return _Series([Column(name, "BIGINT")], name, range(0))
    numbers = range(start, stop + (1 if step > 0 else -1), step)
    return _Series([Column(name, "BIGINT")], name, numbers)


TABLE_FUNCTIONS = {"generate_series": generate_series}

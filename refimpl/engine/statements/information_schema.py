"""SQL's `information_schema` views, answered from this database's real catalog.

Clients and BI tools that want to stay portable across databases read
`information_schema.tables`, `columns`, `schemata`, `views`, `table_constraints` and
`key_column_usage` rather than `pg_catalog`. Each is a relation here under the name
`information_schema.<view>` (the PostgreSQL builder keeps that schema in the name, so a
table of the database named `tables` or `columns` hides nothing), with PostgreSQL 15's
column names in its order, the columns clients read.

Rows are those `pg_catalog` shows the same caller: the tables it may read, the views a
read of which would succeed, the constraints of those tables; nothing of a relation it may
not read. Every table and view is in schema `public` of the catalog named as the database;
`tables` lists the catalog's own relations too, in `pg_catalog` and `information_schema`,
as `pg_class` does (their columns and constraints are not listed).
This engine has no NOT NULL but a primary key's, no column defaults, no CHECK or foreign
keys: a key column is `is_nullable` 'NO', every other 'YES', `column_default` NULL, and the
constraints are PRIMARY KEY and UNIQUE.

`pg_catalog` imports this module and hands in what it knows (`relations`), so that this
module imports nothing of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column
from refimpl.engine.rights import ADMIN_USER
from refimpl.engine.statements.pg_fixed import CATALOG_RELATIONS
from refimpl.engine.statements.pg_views import ViewColumns, readable_views
from refimpl.engine.storage.schema import TableSchema

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

SCHEMA = "information_schema"
PUBLIC = "public"
# Column type -> (data_type, udt_name, numeric_precision, numeric_precision_radix,
# datetime_precision), as PostgreSQL 15 shows its bool, int4, int8, float8, text, timestamptz.
_TYPES: dict[str, tuple[str, str, int | None, int | None, int | None]] = {
    "BOOLEAN": ("boolean", "bool", None, None, None),
    "INT": ("integer", "int4", 32, 2, None),
    "BIGINT": ("bigint", "int8", 64, 2, None),
    "DOUBLE": ("double precision", "float8", 53, 2, None),
    "STRING": ("text", "text", None, None, None),
    "SYMBOL": ("text", "text", None, None, None),
    "TIMESTAMP": ("timestamp with time zone", "timestamptz", None, None, 6),
    "OID": ("oid", "oid", None, None, None),  # a view's column of the catalog's OIDs
}


def _type_row(kind: str) -> tuple[str, str, int | None, int | None, int | None]:
    """`_TYPES`' entry of a column type; a view's array column is PostgreSQL's ARRAY of its
    element's `_udt`, a vector column its type's name (`int2vector`)."""
    if kind.endswith("[]"):
        return ("ARRAY", "_" + _TYPES[kind[:-2]][1], None, None, None)
    return _TYPES.get(kind) or (kind.lower(), kind.lower(), None, None, None)


class Constraint(Protocol):
    """What is read of pg_catalog's `IndexRelation`: `contype` 'p' for a PRIMARY KEY, 'u'
    for a UNIQUE constraint, None for a declared index (not a constraint)."""

    @property
    def name(self) -> str: ...
    @property
    def table(self) -> TableSchema: ...
    @property
    def columns(self) -> tuple[str, ...]: ...
    @property
    def contype(self) -> str | None: ...


# As pg_catalog's `Builder`, `readable_tables` and `catalog_indexes`.
Builder = Callable[["StatementContext", "ViewColumns | None"], QueryOutput]
Tables = Callable[["StatementContext"], list[TableSchema]]
Indexes = Callable[["StatementContext", "ViewColumns | None"], Sequence[Constraint]]


def _columns(spec: str) -> list[Column]:
    """`"table_name:STRING ordinal_position:INT"` -> columns."""
    return [Column(name, kind) for name, _, kind in (i.partition(":") for i in spec.split())]


def _yes(flag: bool) -> str:
    return "YES" if flag else "NO"


def relations(readable_tables: Tables, catalog_indexes: Indexes) -> dict[str, Builder]:
    """The relations `information_schema.<view>` by lower-case name, reading the tables
    and constraints through pg_catalog's `readable_tables` and `catalog_indexes`."""

    def tables(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "table_catalog:STRING table_schema:STRING table_name:STRING table_type:STRING"
            " self_referencing_column_name:STRING reference_generation:STRING"
            " user_defined_type_catalog:STRING user_defined_type_schema:STRING"
            " user_defined_type_name:STRING is_insertable_into:STRING is_typed:STRING"
            " commit_action:STRING"
        )
        catalog = context.database.name
        found: list[tuple[str, str]] = [(t.name, "BASE TABLE") for t in readable_tables(context)]
        found += [(v.name, "VIEW") for v in readable_views(context, views)]
        rows = [
            (catalog, PUBLIC, name, kind, None, None, None, None, None,
             _yes(kind == "BASE TABLE"), "NO", None)
            for name, kind in sorted(found, key=lambda f: f[0].lower())
        ]  # fmt: skip
        # The catalog's own relations, as pg_class lists them to every caller (PostgreSQL's
        # to every role, which may read them); nobody writes to them here.
        for name, (_, relkind) in CATALOG_RELATIONS.items():
            if name not in context.database.tables:
                schema, _, relname = name.rpartition(".")
                kind = "BASE TABLE" if relkind == "r" else "VIEW"
                rows.append((catalog, schema or "pg_catalog", relname, kind, None, None, None,
                             None, None, "NO", "NO", None))  # fmt: skip
        return QueryOutput(columns, rows)

    def columns_(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "table_catalog:STRING table_schema:STRING table_name:STRING column_name:STRING"
            " ordinal_position:INT column_default:STRING is_nullable:STRING data_type:STRING"
            " character_maximum_length:INT numeric_precision:INT numeric_precision_radix:INT"
            " numeric_scale:INT datetime_precision:INT udt_catalog:STRING udt_schema:STRING"
            " udt_name:STRING is_identity:STRING is_generated:STRING is_updatable:STRING"
        )
        catalog = context.database.name

        def row(table: str, number: int, name: str, kind: str, key: bool, table_kind: bool) -> Any:
            data_type, udt, precision, radix, datetime = _type_row(kind)
            scale = 0 if radix is not None and kind != "DOUBLE" else None
            return (
                catalog, PUBLIC, table, name, number, None, _yes(not key), data_type, None,
                precision, radix, scale, datetime, catalog, "pg_catalog", udt, "NO", "NEVER",
                _yes(table_kind),
            )  # fmt: skip

        rows = []
        for schema in readable_tables(context):
            keys = {k.lower() for k in schema.primary_key}
            for number, column in enumerate(schema.columns, start=1):
                key = column.name.lower() in keys
                rows.append(row(schema.name, number, column.name, column.type, key, True))
        for view in readable_views(context, views):
            for number, view_column in enumerate(view.columns, start=1):
                rows.append(
                    row(view.name, number, view_column.name, view_column.type, False, False)
                )
        rows.sort(key=lambda r: (r[2].lower(), r[4]))
        return QueryOutput(columns, rows)

    def schemata(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "catalog_name:STRING schema_name:STRING schema_owner:STRING"
            " default_character_set_catalog:STRING default_character_set_schema:STRING"
            " default_character_set_name:STRING sql_path:STRING"
        )
        catalog = context.database.name
        rows = [
            (catalog, name, ADMIN_USER, None, None, None, None)
            for name in ("information_schema", "pg_catalog", PUBLIC)
        ]
        return QueryOutput(columns, rows)

    def views_(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "table_catalog:STRING table_schema:STRING table_name:STRING view_definition:STRING"
            " check_option:STRING is_updatable:STRING is_insertable_into:STRING"
            " is_trigger_updatable:STRING is_trigger_deletable:STRING"
            " is_trigger_insertable_into:STRING"
        )
        catalog = context.database.name
        rows = [
            (catalog, PUBLIC, v.name, v.definition(), "NONE", "NO", "NO", "NO", "NO", "NO")
            for v in readable_views(context, views)
        ]
        return QueryOutput(columns, rows)

    def constraints(context: StatementContext, views: ViewColumns | None) -> list[Constraint]:
        return [i for i in catalog_indexes(context, views) if i.contype is not None]

    def table_constraints(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "constraint_catalog:STRING constraint_schema:STRING constraint_name:STRING"
            " table_catalog:STRING table_schema:STRING table_name:STRING"
            " constraint_type:STRING is_deferrable:STRING initially_deferred:STRING"
            " enforced:STRING nulls_distinct:STRING"
        )
        catalog = context.database.name
        rows = [
            (catalog, PUBLIC, c.name, catalog, PUBLIC, c.table.name,
             "PRIMARY KEY" if c.contype == "p" else "UNIQUE", "NO", "NO", "YES",
             None if c.contype == "p" else "YES")
            for c in constraints(context, views)
        ]  # fmt: skip
        return QueryOutput(columns, rows)

    def key_column_usage(context: StatementContext, views: ViewColumns | None) -> QueryOutput:
        columns = _columns(
            "constraint_catalog:STRING constraint_schema:STRING constraint_name:STRING"
            " table_catalog:STRING table_schema:STRING table_name:STRING column_name:STRING"
            " ordinal_position:INT position_in_unique_constraint:INT"
        )
        catalog = context.database.name
        rows = [
            (catalog, PUBLIC, c.name, catalog, PUBLIC, c.table.name, name, number, None)
            for c in constraints(context, views)
            for number, name in enumerate(c.columns, start=1)
        ]
        return QueryOutput(columns, rows)

    built: dict[str, Builder] = {
        "tables": tables,
        "columns": columns_,
        "schemata": schemata,
        "views": views_,
        "table_constraints": table_constraints,
        "key_column_usage": key_column_usage,
    }
    return {f"{SCHEMA}.{name}": build for name, build in built.items()}

"""PostgreSQL's catalog functions and table functions, answered from this database's real
catalog: `pg_get_userbyid`, `format_type`, `pg_get_indexdef`, `pg_get_viewdef`,
`pg_size_pretty`, `current_schema()`, `version()`, ...; `generate_series` and `unnest`.
The relations they describe are `pg_catalog`'s; this module only reads them.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.arrays import (
    array_upper,
    element_type,
    elements_of,
    subscripted_items,
)
from refimpl.engine.query.compiled import Compiled, Evaluator, Scope
from refimpl.engine.query.expressions import compile_expression, constant_value
from refimpl.engine.query.session_functions import SessionOf
from refimpl.engine.result import Column
from refimpl.engine.rights import ADMIN_USER, Right
from refimpl.engine.statements import pg_catalog
from refimpl.engine.statements.pg_catalog import (
    FORMAT_TYPE,
    SERVER_VERSION,
    TYPES,
    IndexRelation,
    catalog_indexes,
    catalog_users,
    name_oid,
    quote_name,
    readable_tables,
    role_oid,
)
from refimpl.engine.statements.pg_fixed import CATALOG_RELATIONS
from refimpl.engine.statements.pg_views import ViewColumns, ViewRelation, readable_views
from refimpl.engine.statements.routines import session_principal
from refimpl.engine.storage.access_hints import AccessHints
from refimpl.errors import (
    Forbidden,
    InvalidValue,
    NotAllowed,
    SqlError,
    TypeMismatch,
    Unauthorized,
    UnknownTable,
    UserError,
)
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import ScalarFunction, StatementContext

# A view's columns as the session asking sees them (`queries.view_columns`).
ViewColumnsOf = Callable[["StatementContext", str], list[Column]]


# --- functions ------------------------------------------------------------------------------


# pg_size_pretty's units: (name, the size from which the next unit is used, half-rounded).
_SIZE_UNITS = (
    ("bytes", 10 * 1024, False),
    ("kB", 20 * 1024 - 1, True),
    ("MB", 20 * 1024 - 1, True),
    ("GB", 20 * 1024 - 1, True),
    ("TB", 20 * 1024 - 1, True),
    ("PB", 0, True),
)


def integer_argument(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeMismatch(f"{what} must be an integer, not {value!r}")
    return value


def size_pretty(size: int | None) -> str | None:
    """PostgreSQL 15's `pg_size_pretty(bigint)`: bytes below 10 kB, then the first unit under
    which the value stays below 20 thousand, half-rounded (`10240` is `10 kB`)."""
    if size is None:
        return None
    integer_argument(size, "the size pg_size_pretty() writes")
    # The magnitude is scaled and the sign put back, as C's division toward zero does.
    sign, magnitude = (-1 if size < 0 else 1), abs(size)
    for number, (name, limit, rounded) in enumerate(_SIZE_UNITS):
        if number == len(_SIZE_UNITS) - 1 or magnitude < limit:
            return f"{sign * ((magnitude + 1) // 2 if rounded else magnitude)} {name}"
        # One bit less when the next unit is half-rounded (it keeps halves), one more when
        # this one is.
        magnitude >>= 10 - _SIZE_UNITS[number + 1][2] + rounded
    raise AssertionError("the last unit always answers")


def _function(arity: Sequence[int], result: str, compute: Callable[..., Any]) -> ScalarFunction:
    """A function of its arguments alone (`compute(*args)`), whatever the session."""

    def build(call: ast.FuncCall, scope: Scope, session: SessionOf[StatementContext]) -> Compiled:
        args = _arguments(call, scope, arity)

        def run(row: Sequence[Any]) -> Any:
            return compute(*[arg(row) for arg in args])

        return Compiled(run, result)

    return build


def _of_session(arity: Sequence[int], result: str, compute: Callable[..., Any]) -> ScalarFunction:
    """A function of the session it runs for and its arguments (`compute(context, *args)`),
    the session read at each call: a kept plan answers each caller for itself."""

    def build(call: ast.FuncCall, scope: Scope, session: SessionOf[StatementContext]) -> Compiled:
        args = _arguments(call, scope, arity)

        def run(row: Sequence[Any]) -> Any:
            return compute(session(), *[arg(row) for arg in args])

        return Compiled(run, result)

    return build


def _arguments(call: ast.FuncCall, scope: Scope, arity: Sequence[int]) -> list[Evaluator]:
    if len(call.args) not in arity:
        counts = " or ".join(str(n) for n in arity)
        raise SqlError(f"{call.name}() takes {counts} argument(s)")
    return [compile_expression(a, scope).fn for a in call.args]


def functions(views: ViewColumnsOf) -> dict[str, ScalarFunction]:
    """The catalog functions psql and drivers call, one table for every session (each call
    runs for the session its plan runs for); `views(context, name)` as `relation` takes
    `views` for `context`."""

    def view_columns(context: StatementContext) -> ViewColumns:
        return functools.partial(views, context)

    def user_by_id(context: StatementContext, oid: Any) -> str | None:
        # The admin user owns every relation: its (fixed) name is known to every caller.
        names = {role_oid(ADMIN_USER): ADMIN_USER}
        names.update((role_oid(name), name) for name, _ in catalog_users(context))
        return None if oid is None else names.get(oid, f"unknown (OID={oid})")

    def format_type(oid: Any, typmod: Any = None) -> str | None:
        if oid is None:
            return None
        shown = FORMAT_TYPE.get(oid) or _PSEUDO_NAMES.get(oid, "???")
        if oid in (1114, 1184) and type(typmod) is int and typmod >= 0:
            return shown.replace("timestamp", f"timestamp({typmod})")  # its precision
        return shown

    def index_of(context: StatementContext, oid: Any) -> IndexRelation | None:
        return next(
            (i for i in catalog_indexes(context, view_columns(context)) if i.oid == oid), None
        )

    def index_definition(
        context: StatementContext, oid: Any, column: Any = 0, pretty: Any = False
    ) -> str | None:
        # Column 0 is the whole statement; column n the index's n-th column, as PostgreSQL.
        if column is None:
            return None
        number = integer_argument(column, "the column number of pg_get_indexdef()")
        index = index_of(context, oid)
        if index is None:
            return None
        if number == 0:
            return index.definition()
        return quote_name(index.columns[number - 1]) if 0 < number <= len(index.columns) else ""

    def constraint_definition(
        context: StatementContext, oid: Any, pretty: Any = False
    ) -> str | None:
        index = index_of(context, oid)
        return None if index is None else index.constraint_definition()

    def view_of(context: StatementContext, oid: Any) -> ViewRelation | None:
        found = readable_views(context, view_columns(context), lambda name: name_oid(name) == oid)
        return found[0] if found else None

    def view_definition(context: StatementContext, oid: Any, pretty: Any = False) -> str | None:
        view = None if oid is None else view_of(context, oid)
        return None if view is None else view.definition()

    def relation_oid(context: StatementContext, name: Any) -> int | None:
        """The OID of the table, view or index named `name` that the caller may read (a
        `public.` or `pg_catalog.` before it and double quotes allowed), else None."""
        if not isinstance(name, str):
            return name if isinstance(name, int) and not isinstance(name, bool) else None
        wanted = _unquoted(name)
        names = [s.name for s in readable_tables(context)]
        names += [i.name for i in catalog_indexes(context, view_columns(context))]
        names += [v.name for v in readable_views(context, view_columns(context))]
        found = next((n for n in names if n.lower() == wanted.lower()), None)
        if found is None and pg_catalog.is_relation(context, wanted.lower()):
            # A catalog relation: PostgreSQL's own OID (`'pg_class'::regclass` is 1259).
            return CATALOG_RELATIONS[wanted.lower()][0]
        return None if found is None else name_oid(found)

    def regclass(context: StatementContext, name: Any) -> int | None:
        if name is None:
            return None
        oid = relation_oid(context, name)
        if oid is None:
            raise UnknownTable(str(name))
        return oid

    def regtype(name: Any) -> int | None:
        if name is None or (isinstance(name, int) and not isinstance(name, bool)):
            return name
        oid = type_oid(name)
        if oid is None:
            raise UserError(f'type "{name}" does not exist')
        return oid

    def has_table_privilege(context: StatementContext, *args: Any) -> bool | None:
        # (user, table, privilege) or (table, privilege): the caller's own rights are asked.
        table, privilege = args[-2], args[-1]
        if table is None or privilege is None:
            return None
        oid = relation_oid(context, table)
        if oid is None:
            raise UnknownTable(str(table))
        wanted = {p.strip().upper() for p in str(privilege).split(",")}
        readable = {name_oid(s.name): s.name for s in readable_tables(context)}
        if wanted <= {"SELECT"}:
            return True  # every relation the caller is shown is one it may read
        name = readable.get(oid)
        return name is not None and _may_write(context, name)

    def table_size(context: StatementContext, oid: Any) -> int | None:
        # What the table's rows count against memory_mb, its index entries included; an
        # index alone has no size of its own here (NULL), nor has an OID of no readable table.
        # A view has no storage: 0, as in PostgreSQL.
        table = next((s for s in readable_tables(context) if name_oid(s.name) == oid), None)
        if table is None:
            return None if oid is None or view_of(context, oid) is None else 0
        return context.database.table_bytes.get(table.name.lower())

    return {
        "pg_get_userbyid": _of_session((1,), "STRING", user_by_id),
        "format_type": _function((2,), "STRING", format_type),
        "pg_table_is_visible": _function((1,), "BOOLEAN",
                                         lambda o: None if o is None else o not in _UNSEARCHED),
        # No object of this engine has a comment (pg_description has no rows).
        "col_description": _function((2,), "STRING", lambda *args: None),
        "obj_description": _function((1, 2), "STRING", lambda *args: None),
        "pg_encoding_to_char": _function((1,), "STRING",
                                         lambda n: None if n is None else "UTF8"),
        "array_to_string": _function((2, 3), "STRING", array_to_string),
        # Column defaults, index expressions and predicates: none exist, so none is shown.
        "pg_get_expr": _function((2, 3), "STRING", lambda *args: None),
        "pg_get_constraintdef": _of_session((1, 2), "STRING", constraint_definition),
        "pg_get_indexdef": _of_session((1, 3), "STRING", index_definition),
        "pg_get_viewdef": _of_session((1, 2), "STRING", view_definition),
        "pg_get_statisticsobjdef_columns": _function((1,), "STRING",
                                                     lambda *args: None),
        "array_upper": _function((2,), "BIGINT", array_upper),
        "pg_table_size": _of_session((1,), "BIGINT", table_size),
        "pg_relation_size": _of_session((1, 2), "BIGINT",
                                        lambda context, oid, *_: table_size(context, oid)),
        "pg_total_relation_size": _of_session((1,), "BIGINT", table_size),
        "pg_size_pretty": _function((1,), "STRING", size_pretty),
        # Every table here is an ordinary one, which PostgreSQL could publish.
        "pg_relation_is_publishable": _function((1,), "BOOLEAN",
                                                lambda oid: None if oid is None else True),
        "current_schema": _function((0,), "STRING", lambda: "public"),
        "current_database": _of_session((0,), "STRING",
                                        lambda context: context.database.name),
        "current_user": _of_session((0,), "STRING", lambda context: context.principal.name),
        # SQL's keywords (spec/sql.md, "Value functions"): USER and CURRENT_ROLE are
        # current_user; SESSION_USER is the session's user, also inside a trigger that runs
        # as its definer; CURRENT_CATALOG is current_database().
        "user": _of_session((0,), "STRING", lambda context: context.principal.name),
        "current_role": _of_session((0,), "STRING", lambda context: context.principal.name),
        "session_user": _of_session((0,), "STRING",
                                    lambda context: session_principal(context).name),
        "current_catalog": _of_session((0,), "STRING", lambda context: context.database.name),
        # The running statement's start, whatever the transaction's (now() is that).
        "statement_timestamp": _of_session((0,), "TIMESTAMP",
                                           lambda context: context.statement_time()),
        "version": _function((0,), "STRING", lambda: SERVER_VERSION),
        "regclass": _of_session((1,), "OID", regclass),
        "to_regclass": _of_session((1,), "OID", relation_oid),
        "regtype": _function((1,), "OID", regtype),
        "to_regtype": _function((1,), "OID", type_oid),
        "uuid": _function((1,), "STRING", uuid_text),
        "has_table_privilege": _of_session((2, 3), "BOOLEAN", has_table_privilege),
        "has_schema_privilege": _function((2, 3), "BOOLEAN",
                                          lambda *args: None if None in args else True),
        "has_database_privilege": _function((2, 3), "BOOLEAN",
                                            lambda *args: None if None in args else True),
        "pg_backend_pid": _function((0,), "INT", lambda: 0),
        # No column is numbered by a sequence here, and there is one (binary) collation.
        "pg_get_function_result": _function((1,), "STRING", lambda oid: None),
        "pg_get_function_arguments": _function((1,), "STRING", lambda oid: None),
        "pg_function_is_visible": _function((1,), "BOOLEAN",
                                            lambda oid: None if oid is None else True),
        "pg_get_serial_sequence": _function((2,), "STRING", lambda *args: None),
        "pg_collation_is_visible": _function((1,), "BOOLEAN",
                                             lambda oid: None if oid is None else True),
        "json_build_object": _function(range(0, 101, 2), "STRING", json_object),
        "current_setting": _function((1, 2), "STRING", current_setting),
        "current_schemas": _function((1,), "STRING[]", current_schemas),
        "btrim": _function((1, 2), "STRING", lambda t, c=" ": _trim(t, c, "both")),
        "trim": _function((1, 2), "STRING", lambda t, c=" ": _trim(t, c, "both")),
        "ltrim": _function((1, 2), "STRING", lambda t, c=" ": _trim(t, c, "leading")),
        "rtrim": _function((1, 2), "STRING", lambda t, c=" ": _trim(t, c, "trailing")),
        "set_config": _function((3,), "STRING", set_config),
    }  # fmt: skip


# information_schema's relations: out of the search path (public, pg_catalog), so not
# visible by a bare name, as in PostgreSQL (psql's \dS leaves them out).
_UNSEARCHED = frozenset(
    oid for name, (oid, _) in CATALOG_RELATIONS.items() if name.startswith("information_schema.")
)


# The settings current_setting() answers: the server's own, which no session changes.
FIXED_SETTINGS = {
    "default_table_access_method": "heap",
    "server_version": SERVER_VERSION.split()[1],
    "server_version_num": "150000",
    "server_encoding": "UTF8",
    "max_identifier_length": "63",
    "integer_datetimes": "on",
    "block_size": "8192",
    "jit": "off",  # no plan is compiled to machine code here
}


def current_setting(name: Any, missing_ok: Any = False) -> str | None:
    """`current_setting(name [, missing_ok])`: a setting of the server's own
    (`FIXED_SETTINGS`); a session's settings (search_path, ...) are the protocol's, which
    SHOW answers: asked here, 0A000 says so."""
    if name is None:
        return None
    found = FIXED_SETTINGS.get(str(name).lower())
    if found is not None:
        return found
    if missing_ok is True:
        return None
    raise NotAllowed(
        f"current_setting('{name}') is not supported: it answers only the server's own"
        f" settings ({', '.join(sorted(FIXED_SETTINGS))}); ask a session's setting with"
        f" SHOW {name}"
    )


def _trim(text: Any, chars: Any, side: str) -> str | None:
    """PostgreSQL's btrim/ltrim/rtrim (`trim([both | leading | trailing] [chars] FROM x)`):
    the longest run of any of `chars` (a space by default) taken off that side."""
    if text is None or chars is None:
        return None
    text, chars = str(text), str(chars)
    if side == "leading":
        return text.lstrip(chars)
    if side == "trailing":
        return text.rstrip(chars)
    return text.strip(chars)


def current_schemas(implicit: Any) -> str | None:
    """`current_schemas(implicit)`: the schemas searched, pg_catalog first when the implicit
    ones are asked for (PostgreSQL's default search_path, `"$user", public`, finds no schema
    named as the user)."""
    if implicit is None:
        return None
    return "{pg_catalog,public}" if implicit else "{public}"


def set_config(name: Any, value: Any, is_local: Any) -> str | None:
    """`set_config(name, value, is_local)`: a server's own setting set to the value it has
    (asyncpg turns `jit` off so); any other value, or another setting, answers 0A000."""
    if name is None:
        return None
    current = current_setting(name)
    if value is not None and str(value).lower() != current:
        raise NotAllowed(
            f"set_config('{name}', '{value}') is not supported: {name} is fixed at"
            f" '{current}' here; use SET for a session's settings"
        )
    return current


def array_to_string(array: Any, separator: Any, null_text: Any = None) -> str | None:
    """PostgreSQL's `array_to_string(a, sep [, null_text])`: the elements' text joined by
    `sep`, a NULL element left out, or written as `null_text` when given."""
    if array is None or separator is None:
        return None
    items, _ = subscripted_items(str(array))
    shown = [item if item is not None else null_text for item in items]
    return str(separator).join(str(item) for item in shown if item is not None)


def json_object(*pairs: Any) -> str:
    """`json_build_object(k1, v1, ...)`: a JSON object's text (keys as text, NULL keys
    refused as in PostgreSQL)."""
    if any(key is None for key in pairs[::2]):
        raise InvalidValue("a key of json_build_object() must not be NULL")
    return json.dumps({str(k): v for k, v in zip(pairs[::2], pairs[1::2], strict=True)})


def _unquoted(name: str) -> str:
    """A relation's name as `regclass` reads it: `public.` or `pg_catalog.` dropped, double
    quotes taken off (a name in none is any case)."""
    name = name.strip()
    for schema in ("public.", "pg_catalog."):
        if name.lower().startswith(schema):
            name = name[len(schema) :]
    if len(name) >= 2 and name[0] == name[-1] == '"':
        return name[1:-1].replace('""', '"')
    return name


# Each PostgreSQL type name the engine's types are shown as -> its OID.
_TYPE_NAMES = {name: oid for oid, name, _, _ in TYPES.values()} | {
    shown: oid for oid, _, _, shown in TYPES.values()
}
# The protocol's types of the session's names and LOCALTIMESTAMP (`Column.pg_type`), which a
# view's column has (pg_attribute).
_TYPE_NAMES |= {"name": 19, "timestamp": 1114, "timestamp without time zone": 1114}


# PostgreSQL's pseudo-types a catalog query names (`prorettype::regtype != 'trigger'::regtype`).
_PSEUDO_TYPES = {"trigger": 2279, "void": 2278, "record": 2249, "event_trigger": 3838}
_PSEUDO_NAMES = {oid: name for name, oid in _PSEUDO_TYPES.items()}


def type_oid(name: Any) -> int | None:
    """`to_regtype(name)`: the OID of the type so named (`int4`, `integer`, `pg_catalog.text`,
    a pseudo-type such as `trigger`), or None for a type this engine does not have."""
    if not isinstance(name, str):
        return None
    wanted = _unquoted(name).lower()
    return _TYPE_NAMES.get(wanted, _PSEUDO_TYPES.get(wanted))


def uuid_text(value: Any) -> str | None:
    """`x::uuid`: a UUID's text in its canonical form (lower case, with hyphens); the
    spellings PostgreSQL reads (braces, no hyphens, upper case) are read too."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(str(value)))
    except ValueError:
        raise InvalidValue(f'invalid input syntax for type uuid: "{value}"') from None


def _may_write(context: StatementContext, table: str) -> bool:
    try:
        context.authorize(Right.WRITE, table)
    except (Forbidden, Unauthorized):
        return False
    return True


# --- table functions ------------------------------------------------------------------------


@dataclass(slots=True)
class _Series:
    """The rows of a table function of one column (`generate_series`, `unnest`), named as
    the function or its alias (`generate_series(1, 3) s` has the column `s`, as in
    PostgreSQL)."""

    columns: list[Column]
    qualifier: str | None
    values: Sequence[Any]
    schema: None = None

    def rows(self, hints: AccessHints) -> Iterator[Sequence[Any]]:
        return ((v,) for v in self.values)


def generate_series(
    context: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> _Series:
    """The integers from start to stop (both included) by step (1 by default); no rows when
    an argument is NULL. psql's catalog queries read it."""
    scope = Scope(columns=[], params=params, functions=context.sql_functions())
    bounds = [constant_value(arg, scope) for arg in source.args]
    if len(bounds) not in (2, 3) or any(
        isinstance(b, bool) or not isinstance(b, int | None) for b in bounds
    ):
        raise SqlError("generate_series() takes two or three integers: start, stop [, step]")
    start, stop, step = (*bounds, 1)[:3]
    if step == 0:
        raise InvalidValue("the step of generate_series() must not be zero")
    name = source.alias or source.name
    if start is None or stop is None or step is None:
        return _Series([Column(name, "BIGINT")], name, range(0))
    numbers = range(start, stop + (1 if step > 0 else -1), step)
    return _Series([Column(name, "BIGINT")], name, numbers)


def unnest(
    context: StatementContext, source: ast.FunctionSource, select: ast.Select, params: Sequence[Any]
) -> _Series:
    """The elements of an array in order, of its elements' type (an array of unknown
    elements, `'{a,b}'`, gives STRING rows); none for NULL. psql's `\\d+` reads it."""
    scope = Scope(columns=[], params=params, functions=context.sql_functions())
    args = [compile_expression(arg, scope) for arg in source.args]
    element = element_type(args[0].type) if len(args) == 1 else None
    if len(args) != 1 or (element is None and args[0].type != "NULL"):
        raise SqlError("unnest() takes one array, written as its text '{a,b}' or ARRAY[a, b]")
    value = args[0].fn(())
    name = source.alias or source.name
    element = "STRING" if element in (None, "SYMBOL") else element
    found = [] if value is None else elements_of(value, args[0].type, element)
    return _Series([Column(name, element)], name, found)


TABLE_FUNCTIONS = {"generate_series": generate_series, "unnest": unnest}

"""Canonical SQL text for statement and expression nodes.

What callers may rely on:

* `to_sql(node)` accepts every statement node, every expression node, `SelectItem`,
  `OrderItem`, `TableSource`, `FunctionSource`, `ColumnDef` and `ParsedScript` (statements
  joined by `;` and a newline).
* For every statement `s` that `parse` can produce, `parse(to_sql(s)).statements[0] == s`;
  the same holds for expressions inside a statement. Parentheses are printed only where the
  precedence of the grammar needs them, so the text reads naturally and the tree comes back
  unchanged.
* Keywords are upper case; names are bare when they are plain words that the grammar accepts as
  names, else in double quotes (with `""` inside); strings are in single quotes (with `''`);
  floats are printed with `repr`, so they read back bit for bit.
* `CREATE TABLE` puts one column on a line; a one-column primary key is written on its column,
  a longer one as a `PRIMARY KEY (a, b)` line; the table options follow the `)` on its line.

Nodes the parser cannot produce (an OFFSET without a LIMIT, a NaN literal) raise ValueError.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from refimpl.sql import ast
from refimpl.sql.ast_access import AlterUser
from refimpl.sql.ast_calls import VALUE_WORDS, call_text
from refimpl.sql.ast_copy import BackupDatabase
from refimpl.sql.parser import KEYWORDS, NAME_KEYWORDS, RESERVED_WORDS
from refimpl.sql.printer_session import modes_text, session_printers

__all__ = ["quote_name", "quote_string", "to_sql"]

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NEEDS_QUOTES = (KEYWORDS - NAME_KEYWORDS) | RESERVED_WORDS | {w.upper() for w in VALUE_WORDS}


def quote_name(name: str) -> str:
    """A name as it must be written: bare if that reads back as the same name, else quoted."""
    if _PLAIN.match(name) and name.upper() not in _NEEDS_QUOTES:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_string(value: str) -> str:
    """A string literal."""
    return "'" + value.replace("'", "''") + "'"


# ---------------------------------------------------------------------------------------
# Expressions
# ---------------------------------------------------------------------------------------

# Binding strength, loosest first, as in refimpl/grammar.lark: OR < AND < NOT < comparison,
# IS, IN, BETWEEN, LIKE < << >> & | < + - || < * / % < unary minus and plus < atoms.
_OR, _AND, _NOT, _PREDICATE, _BITS, _SUM, _PRODUCT, _UNARY, _ATOM = range(1, 10)
_BINARY_LEVEL = {
    "OR": _OR,
    "AND": _AND,
    "=": _PREDICATE,
    "<>": _PREDICATE,
    "<": _PREDICATE,
    "<=": _PREDICATE,
    ">": _PREDICATE,
    ">=": _PREDICATE,
    "~": _PREDICATE,
    "!~": _PREDICATE,
    "~*": _PREDICATE,
    "!~*": _PREDICATE,
    "<<": _BITS,
    ">>": _BITS,
    "&": _BITS,
    "|": _BITS,
    "+": _SUM,
    "-": _SUM,
    "||": _SUM,
    "*": _PRODUCT,
    "/": _PRODUCT,
    "%": _PRODUCT,
}


def _expr(node: ast.Expr, weakest: int = 0) -> str:
    """`node` as text, in parentheses if it binds more loosely than `weakest` allows."""
    text, level = _render(node)
    return f"({text})" if level < weakest else text


def _literal(node: ast.Literal) -> tuple[str, int]:
    value = node.value
    if value is None:
        return "NULL", _ATOM
    if node.type == "BOOLEAN":
        return ("TRUE" if value else "FALSE"), _ATOM
    if node.type == "STRING":
        return quote_string(str(value)), _ATOM
    if node.type == "BLOB":
        return f"X'{bytes(value).hex()}'", _ATOM  # type: ignore[call-overload]
    if node.type == "DOUBLE":
        number = float(value)  # type: ignore[arg-type]
        if math.isnan(number):
            raise ValueError("a NaN literal has no SQL text")
        # 1e999 overflows to infinity when read back, the only way to write it as a literal.
        text = ("-1e999" if number < 0 else "1e999") if math.isinf(number) else repr(number)
    else:
        text = str(int(value))  # type: ignore[call-overload]
    # A negative number is a unary minus to the grammar.
    return text, _UNARY if text.startswith("-") else _ATOM


def _render(node: ast.Expr) -> tuple[str, int]:
    if isinstance(node, ast.Literal):
        return _literal(node)
    if isinstance(node, ast.ColumnRef):
        if node.table is None:
            return quote_name(node.name), _ATOM
        return f"{quote_name(node.table)}.{quote_name(node.name)}", _ATOM
    if isinstance(node, ast.Param):
        return "?", _ATOM
    if isinstance(node, ast.Binary):
        level = _BINARY_LEVEL[node.op]
        # Left-associative: the left side may be of the same level, the right may not.
        left = _expr(node.left, level)
        right = _expr(node.right, level + 1)
        return f"{left} {node.op} {right}", level
    if isinstance(node, ast.Unary):
        if node.op == "NOT":
            return f"NOT {_expr(node.operand, _NOT)}", _NOT
        operand = _expr(node.operand, _UNARY)
        # `--` would start a comment, and `- -x` keeps a double negation readable.
        space = " " if operand[:1] in ("-", "+") else ""
        return f"{node.op}{space}{operand}", _UNARY
    if isinstance(node, ast.IsNull):
        not_ = "NOT " if node.negated else ""
        return f"{_expr(node.operand, _PREDICATE)} IS {not_}NULL", _PREDICATE
    if isinstance(node, ast.InList):
        not_ = "NOT " if node.negated else ""
        items = ", ".join(_expr(item) for item in node.items)
        return f"{_expr(node.operand, _PREDICATE)} {not_}IN ({items})", _PREDICATE
    if isinstance(node, ast.Between):
        not_ = "NOT " if node.negated else ""
        low, high = _expr(node.low, _BITS), _expr(node.high, _BITS)
        return f"{_expr(node.operand, _PREDICATE)} {not_}BETWEEN {low} AND {high}", _PREDICATE
    if isinstance(node, ast.Like):
        not_ = "NOT " if node.negated else ""
        pattern = _expr(node.pattern, _BITS)
        return f"{_expr(node.operand, _PREDICATE)} {not_}LIKE {pattern}", _PREDICATE
    if isinstance(node, ast.Case):
        parts = ["CASE"]
        if node.operand is not None:
            parts.append(_expr(node.operand))
        for condition, result in node.whens:
            parts.append(f"WHEN {_expr(condition)} THEN {_expr(result)}")
        if node.else_ is not None:
            parts.append(f"ELSE {_expr(node.else_)}")
        parts.append("END")
        return " ".join(parts), _ATOM
    if isinstance(node, ast.Cast) and node.element is not None:
        return f"({_expr(node.operand)})::{node.element}[]", _ATOM
    if isinstance(node, ast.Cast) and node.type == "OID":  # no column type: `x::oid` only
        return f"({_expr(node.operand)})::oid", _ATOM
    if isinstance(node, ast.Cast):
        return f"CAST({_expr(node.operand)} AS {node.type})", _ATOM
    if isinstance(node, ast.FuncCall | ast.WindowCall):
        return call_text(node, _expr, _order_item, quote_name), _ATOM
    if isinstance(node, ast.FieldSelect):
        return f"({_expr(node.operand)}).{quote_name(node.field)}", _ATOM
    if isinstance(node, ast.Star):
        return ("*" if node.table is None else f"{quote_name(node.table)}.*"), _ATOM
    if isinstance(node, ast.ScalarSubquery):
        return f"({_query(node.query)})", _ATOM
    if isinstance(node, ast.Exists):
        return f"EXISTS ({_query(node.query)})", _ATOM
    if isinstance(node, ast.ArrayQuantified):
        return (
            f"{_expr(node.operand, _PREDICATE)} {node.op} {node.quantifier} ({_expr(node.array)})",
            _PREDICATE,
        )
    if isinstance(node, ast.ArraySubquery):
        return f"ARRAY({_query(node.query)})", _ATOM
    if isinstance(node, ast.Subscript):
        return f"{_expr(node.array, _ATOM)}[{_expr(node.index)}]", _ATOM
    if isinstance(node, ast.ArrayValue):
        return f"ARRAY[{', '.join(_expr(item) for item in node.items)}]", _ATOM
    if isinstance(node, ast.InSubquery):
        not_ = "NOT " if node.negated else ""
        return (f"{_expr(node.operand, _PREDICATE)} {not_}IN ({_query(node.query)})", _PREDICATE)
    if isinstance(node, ast.Quantified):
        return (
            f"{_expr(node.operand, _PREDICATE)} {node.op} {node.quantifier} ({_query(node.query)})",
            _PREDICATE,
        )
    raise TypeError(f"not an expression node: {node!r}")


# ---------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------


def _names(names: tuple[str, ...]) -> str:
    return ", ".join(quote_name(name) for name in names)


def _alias(alias: str | None) -> str:
    return "" if alias is None else f" AS {quote_name(alias)}"


def _select_item(item: ast.SelectItem) -> str:
    return _expr(item.expr) + _alias(item.alias)


def _order_item(item: ast.OrderItem) -> str:
    text = _expr(item.expr)
    if item.descending:
        text += " DESC"
    if item.nulls_first is not None:
        text += " NULLS FIRST" if item.nulls_first else " NULLS LAST"
    return text


def _source(source: ast.Source) -> str:
    if isinstance(source, ast.TableSource):
        return quote_name(source.name) + _alias(source.alias)
    if isinstance(source, ast.JoinSource):
        # Joins nest to the left: a join on the right side is one in parentheses.
        left, right = _source(source.left), _source(source.right)
        if isinstance(source.right, ast.JoinSource):
            right = f"({right})"
        if source.natural:
            kind = "" if source.kind == "INNER" else f" {source.kind}"
            return f"{left} NATURAL{kind} JOIN {right}"
        if source.comma:
            return f"{left}, {right}"
        if source.kind == "CROSS":
            return f"{left} CROSS JOIN {right}"
        if source.using:
            spec = f" USING ({_names(source.using)})"
        else:
            spec = " ON " + _expr(source.on) if source.on is not None else ""
        return f"{left} {source.kind} JOIN {right}{spec}"
    if isinstance(source, ast.SubquerySource):
        text = f"({_query(source.query)})"
        if source.alias is not None:
            text += _alias(source.alias)
            if source.columns:
                text += f" ({_names(source.columns)})"
        return text
    args = ", ".join(_expr(arg) for arg in source.args)
    return f"{quote_name(source.name)}({args}){_alias(source.alias)}"


def _query(node: ast.Query) -> str:
    printer = _STATEMENTS[type(node)]
    return printer(node)


def _tail(
    order_by: tuple[ast.OrderItem, ...], limit: ast.Expr | None, offset: ast.Expr | None
) -> list[str]:
    """ORDER BY and LIMIT of a query."""
    parts = []
    if order_by:
        parts.append("ORDER BY " + ", ".join(_order_item(item) for item in order_by))
    if limit is not None:
        parts.append("LIMIT " + _expr(limit))
        if offset is not None:
            parts.append("OFFSET " + _expr(offset))
    elif offset is not None:
        raise ValueError("OFFSET without LIMIT has no SQL text")
    return parts


def _operand(node: ast.Query) -> str:
    """One side of a set operation: a SELECT without ORDER BY and LIMIT, VALUES, or the left
    side's own set operation (left to right needs no parentheses)."""
    if isinstance(node, ast.Select) and not (node.order_by or node.limit or node.offset):
        return _select(node)
    if isinstance(node, ast.Values):
        return _values(node)
    raise ValueError(
        "a side of a set operation has no SQL text of its own: ORDER BY, LIMIT"
        " and WITH apply to the whole"
    )


def _set_operation(node: ast.SetOperation) -> str:
    left = node.left
    if isinstance(left, ast.SetOperation) and not (left.order_by or left.limit or left.offset):
        left_text = _set_operation(left)
    else:
        left_text = _operand(left)
    if isinstance(node.right, ast.SetOperation):
        raise ValueError("set operations nest to the left")
    op = node.op + (" ALL" if node.all else "")
    return " ".join(
        [f"{left_text} {op} {_operand(node.right)}", *_tail(node.order_by, node.limit, node.offset)]
    )


def _values(node: ast.Values) -> str:
    return "VALUES " + ", ".join("(" + ", ".join(_expr(v) for v in row) + ")" for row in node.rows)


def _with(node: ast.WithQuery) -> str:
    tables = []
    for table in node.tables:
        columns = f" ({_names(table.columns)})" if table.columns else ""
        tables.append(f"{quote_name(table.name)}{columns} AS ({_query(table.query)})")
    head = "WITH RECURSIVE " if node.recursive else "WITH "
    if isinstance(node.body, ast.WithQuery):
        raise ValueError("a WITH query's body has no WITH of its own")
    return head + ", ".join(tables) + " " + _query(node.body)


def _select(node: ast.Select) -> str:
    parts = ["SELECT"]
    if node.distinct:
        parts.append("DISTINCT")
    parts.append(", ".join(_select_item(item) for item in node.items))
    if node.source is not None:
        parts.append("FROM " + _source(node.source))
    if node.where is not None:
        parts.append("WHERE " + _expr(node.where))
    if node.group_by:
        parts.append("GROUP BY " + ", ".join(_expr(e) for e in node.group_by))
    if node.having is not None:
        parts.append("HAVING " + _expr(node.having))
    parts += _tail(node.order_by, node.limit, node.offset)
    return " ".join(parts)


def _where(where: ast.Expr | None) -> str:
    return "" if where is None else " WHERE " + _expr(where)


def _if(flag: bool, words: str) -> str:
    return f" {words}" if flag else ""


def _insert(node: ast.Insert) -> str:
    text = "INSERT INTO " + quote_name(node.table)
    if node.columns is not None:
        text += f" ({_names(node.columns)})"
    if node.select is not None:
        return f"{text} {_query(node.select)}{_returning(node.returning)}"
    rows = ", ".join("(" + ", ".join(_expr(v) for v in row) + ")" for row in node.rows or ())
    return f"{text} VALUES {rows}{_returning(node.returning)}"


def _returning(items: tuple[ast.SelectItem, ...]) -> str:
    return " RETURNING " + ", ".join(to_sql(item) for item in items) if items else ""


def _update(node: ast.Update) -> str:
    sets = ", ".join(f"{quote_name(name)} = {_expr(value)}" for name, value in node.assignments)
    return f"UPDATE {quote_name(node.table)} SET {sets}{_where(node.where)}" + _returning(
        node.returning
    )


def _create_table(node: ast.CreateTable) -> str:
    lines = []
    # A one-column key is written on its column (the first of that name); any other key, or
    # one naming no column, as a line of its own.
    inline = node.primary_key[0] if len(node.primary_key) == 1 else None
    for column in node.columns:
        line = f"  {quote_name(column.name)} {column.type}"
        if column.name == inline:
            line += " PRIMARY KEY"
            inline = None
        lines.append(line)
    if node.primary_key and (inline is not None or len(node.primary_key) > 1):
        lines.append(f"  PRIMARY KEY ({_names(node.primary_key)})")
    lines += [f"  UNIQUE ({_names(columns)})" for columns in node.unique]
    lines += [f"  {_index_def(index)}" for index in node.indexes]
    head = "CREATE TABLE" + _if(node.if_not_exists, "IF NOT EXISTS")
    text = f"{head} {quote_name(node.name)} (\n" + ",\n".join(lines) + "\n)"
    if node.timeseries is not None:
        text += f" TIMESERIES({quote_name(node.timeseries)})"
    if node.partition_by is not None:
        text += f" PARTITION BY {node.partition_by}"
        if node.partition_symbol is not None:
            text += f", SYMBOL({quote_name(node.partition_symbol)})"
    elif node.partition_symbol is not None:
        raise ValueError("PARTITION BY SYMBOL needs a time unit (NONE, YEAR, MONTH or DAY)")
    if node.sort_by:
        text += f" SORT BY ({_names(node.sort_by)})"
    if node.dedup_key:
        text += f" DEDUP KEY ({_names(node.dedup_key)})"
    if node.replica_identity_full:
        text += " REPLICA IDENTITY FULL"
    return text


def _index_def(index: ast.IndexDef) -> str:
    unique = "UNIQUE " if index.unique else ""
    return f"{unique}INDEX {quote_name(index.name)} ({_names(index.columns)})"


def _create_index(node: ast.CreateIndex) -> str:
    unique = " UNIQUE" if node.index.unique else ""
    return (
        f"CREATE{unique} INDEX{_if(node.if_not_exists, 'IF NOT EXISTS')}"
        f" {quote_name(node.index.name)} ON {quote_name(node.table)}"
        f" ({_names(node.index.columns)})"
    )


def _drop_index(node: ast.DropIndex) -> str:
    table = "" if node.table is None else f" ON {quote_name(node.table)}"
    return f"DROP INDEX{_if(node.if_exists, 'IF EXISTS')} {quote_name(node.name)}{table}"


def _copy_options(options: tuple[ast.CopyOption, ...]) -> str:
    def one(option: ast.CopyOption) -> str:
        name = option.name.upper()
        if option.value is None:
            return name
        if isinstance(option.value, bool):
            return f"{name} {'TRUE' if option.value else 'FALSE'}"
        return f"{name} {quote_string(option.value)}"

    return f" WITH ({', '.join(one(o) for o in options)})" if options else ""


def _copy_from(node: ast.CopyFrom) -> str:
    columns = f" ({_names(node.columns)})" if node.columns is not None else ""
    source = "STDIN" if node.file is None else quote_string(node.file)
    return f"COPY {quote_name(node.table)}{columns} FROM {source}" + _copy_options(node.options)


def _copy_to(node: ast.CopyTo) -> str:
    if node.query is not None:
        assert isinstance(node.query, ast.Query)  # the parser's only statements there
        target = f"({_query(node.query)})"
    else:
        assert node.table is not None
        columns = f" ({_names(node.columns)})" if node.columns is not None else ""
        target = quote_name(node.table) + columns
    return f"COPY {target} TO STDOUT" + _copy_options(node.options)


def _grantee(name: str) -> str:
    return "PUBLIC" if name == ast.PUBLIC else quote_name(name)


def _drop_token(node: ast.DropToken) -> str:
    if node.token is not None:
        return "DROP TOKEN " + quote_string(node.token)
    return "DROP TOKEN FOR " + quote_name(node.user or "")


def _create_token(node: ast.CreateToken) -> str:
    text = "CREATE TOKEN FOR " + quote_name(node.user)
    if node.expires_in is not None:
        text += " EXPIRES IN " + quote_string(node.expires_in)
    return text


def _steps(body: tuple[ast.Statement, ...]) -> str:
    return " ".join(to_sql(statement) + ";" for statement in body)


def _create_trigger(node: ast.CreateTrigger) -> str:
    definer = "" if node.definer is None else f" DEFINER = {quote_name(node.definer)}"
    event = node.event + (f" OF {_names(node.columns)}" if node.columns else "")
    when = "" if node.when is None else f" WHEN {_expr(node.when)}"
    return (
        f"CREATE{definer} TRIGGER{_if(node.if_not_exists, 'IF NOT EXISTS')} "
        f"{quote_name(node.name)} {node.timing} {event} ON {quote_name(node.table)}"
        f" FOR EACH ROW{when} BEGIN {_steps(node.body)} END"
    )


def _create_procedure(node: ast.CreateProcedure) -> str:
    params = ", ".join(f"{quote_name(p.name)} {p.type}" for p in node.params)
    head = f"CREATE{_if(node.or_replace, 'OR REPLACE')} PROCEDURE {quote_name(node.name)}({params})"
    if node.body is None:
        return f"{head} LANGUAGE SQL AS $${node.source}$$"
    return f"{head} LANGUAGE SQL BEGIN ATOMIC {_steps(node.body)} END"


_STATEMENTS: dict[type, Callable[[Any], str]] = {
    ast.Select: _select,
    ast.Subscribe: lambda n: "SUBSCRIBE " + _query(n.select),
    ast.Values: _values,
    ast.SetOperation: _set_operation,
    ast.WithQuery: _with,
    ast.CreateView: lambda n: (
        f"CREATE VIEW{_if(n.if_not_exists, 'IF NOT EXISTS')} "
        f"{quote_name(n.name)} AS {_query(n.query)}"
    ),
    ast.DropView: lambda n: f"DROP VIEW{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}",
    ast.Insert: _insert,
    ast.Update: _update,
    ast.Delete: lambda n: (
        f"DELETE FROM {quote_name(n.table)}{_where(n.where)}{_returning(n.returning)}"
    ),
    ast.CreateTable: _create_table,
    ast.CreateIndex: _create_index,
    ast.DropIndex: _drop_index,
    ast.Explain: lambda n: "EXPLAIN " + to_sql(n.query),
    ast.DropTable: lambda n: f"DROP TABLE{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}",
    ast.Truncate: lambda n: f"TRUNCATE TABLE {quote_name(n.name)}",
    ast.CopyFrom: _copy_from,
    ast.CopyTo: _copy_to,
    BackupDatabase: lambda n: (
        f"BACKUP DATABASE {quote_name(n.database)} TO {quote_string(n.target)}"
    ),
    ast.AddColumn: lambda n: (
        f"ALTER TABLE {quote_name(n.table)} ADD COLUMN {quote_name(n.column.name)} {n.column.type}"
    ),
    ast.DropColumn: lambda n: (
        f"ALTER TABLE {quote_name(n.table)} DROP COLUMN {quote_name(n.column)}"
    ),
    ast.AlterReplicaIdentity: lambda n: (
        f"ALTER TABLE {quote_name(n.table)} REPLICA IDENTITY " + ("FULL" if n.full else "DEFAULT")
    ),
    ast.DropPartitionList: lambda n: (
        f"ALTER TABLE {quote_name(n.table)} DROP PARTITION LIST "
        + ", ".join(quote_string(p) for p in n.partitions)
    ),
    ast.DropPartitionWhere: lambda n: (
        f"ALTER TABLE {quote_name(n.table)} DROP PARTITION{_where(n.where)}"
    ),
    ast.CreateDatabase: lambda n: (
        f"CREATE DATABASE{_if(n.if_not_exists, 'IF NOT EXISTS')} {quote_name(n.name)}"
    ),
    ast.DropDatabase: lambda n: (
        f"DROP DATABASE{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}"
    ),
    ast.AlterDatabaseSet: lambda n: (
        f"ALTER DATABASE {quote_name(n.name)} SET {quote_name(n.setting)} = {quote_string(n.value)}"
    ),
    ast.Begin: lambda n: "BEGIN" + modes_text(n.modes),
    ast.Commit: lambda n: "COMMIT",
    ast.Rollback: lambda n: "ROLLBACK",
    ast.Checkpoint: lambda n: "CHECKPOINT",
    ast.ShowTables: lambda n: "SHOW TABLES",
    ast.ShowColumns: lambda n: f"SHOW COLUMNS FROM {quote_name(n.table)}",
    ast.ShowCreateTable: lambda n: f"SHOW CREATE TABLE {quote_name(n.table)}",
    ast.ShowUsers: lambda n: "SHOW USERS",
    ast.ShowDatabases: lambda n: "SHOW DATABASES",
    ast.ShowGrants: lambda n: f"SHOW GRANTS FOR {quote_name(n.user)}",
    ast.CreateUser: lambda n: (
        f"CREATE USER{_if(n.if_not_exists, 'IF NOT EXISTS')} {quote_name(n.name)}"
        + _if(n.replication, "REPLICATION")
    ),
    AlterUser: lambda n: (
        f"ALTER USER {quote_name(n.name)} {'REPLICATION' if n.replication else 'NOREPLICATION'}"
    ),
    ast.DropUser: lambda n: f"DROP USER{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}",
    ast.CreateToken: _create_token,
    ast.DropToken: _drop_token,
    ast.GrantRole: lambda n: (
        f"GRANT {n.role} ON DATABASE {quote_name(n.database)} TO {_grantee(n.grantee)}"
    ),
    ast.RevokeRole: lambda n: (
        f"REVOKE {n.role} ON DATABASE {quote_name(n.database)} FROM {_grantee(n.grantee)}"
    ),
    ast.GrantSelect: lambda n: (
        f"GRANT SELECT ON TABLE {quote_name(n.table)} TO {_grantee(n.grantee)}"
    ),
    ast.RevokeSelect: lambda n: (
        f"REVOKE SELECT ON TABLE {quote_name(n.table)} FROM {_grantee(n.grantee)}"
    ),
    ast.SelectItem: _select_item,
    ast.OrderItem: _order_item,
    ast.TableSource: _source,
    ast.FunctionSource: _source,
    ast.JoinSource: _source,
    ast.SubquerySource: _source,
    ast.ColumnDef: lambda n: f"{quote_name(n.name)} {n.type}",
    ast.ParsedScript: lambda n: ";\n".join(to_sql(s) for s in n.statements),
    ast.CreateTrigger: _create_trigger,
    ast.DropTrigger: lambda n: f"DROP TRIGGER{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}",
    ast.ShowTriggers: lambda n: "SHOW TRIGGERS",
    ast.CreateProcedure: _create_procedure,
    ast.DropProcedure: lambda n: (
        f"DROP PROCEDURE{_if(n.if_exists, 'IF EXISTS')} {quote_name(n.name)}"
    ),
    ast.Call: lambda n: f"CALL {quote_name(n.name)}({', '.join(_expr(a) for a in n.args)})",
    ast.ShowProcedures: lambda n: "SHOW PROCEDURES",
}
_STATEMENTS.update(session_printers(quote_name, lambda q: _query(q)))


def to_sql(node: ast.Statement | ast.Expr | Any) -> str:
    """Canonical SQL text of a statement, expression or clause node (see the module doc)."""
    printer = _STATEMENTS.get(type(node))
    if printer is not None:
        return printer(node)
    if isinstance(node, ast.Expr):
        return _expr(node)
    raise TypeError(f"cannot print {type(node).__name__} as SQL")

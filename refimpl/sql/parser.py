"""SQL text -> typed statement objects (`refimpl.sql.ast`).

What callers may rely on:

* `parse(text)` returns a `ParsedScript`: the statements of `text` in order (separated by `;`,
  a trailing `;` and empty statements allowed), `param_count` (the number of `?` in the whole
  text) and `sources` (each statement's own text, whitespace-trimmed). `Param.index` counts
  from 0 over the whole text in text order.
* Every problem with the text raises `SqlSyntaxError` whose message is one sentence that starts
  with `line L, column C:` (1-based, the offending token) and whose `line`/`column` attributes
  hold the same numbers. Messages never show the parser's internal names.
* `parse_cached(text)` is `parse` with an LRU cache keyed by the text; results are immutable and
  may be shared between threads. Errors are not cached.
* Both are thread-safe: the lark parser is built once at import and is immutable.

Keyword handling (see the top of `refimpl/grammar.lark`): `RESERVED_WORDS` are never names
unless quoted; `NAME_KEYWORDS` are keywords that also work as bare names everywhere; any other
word in `KEYWORDS` must be quoted where it is meant as a name. `refimpl.sql.printer` uses these
sets to decide when a name needs quotes.
"""

from __future__ import annotations

import functools
import re
import threading
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast
from refimpl.sql.ast import Expr

__all__ = [
    "KEYWORDS",
    "NAME_KEYWORDS",
    "RESERVED_WORDS",
    "parse",
    "parse_cached",
]

# `?` numbering needs one counter per parse. The transformer is shared by every thread (it is
# built into the parser), so the counter lives in thread-local storage, reset by `parse`.
_local = threading.local()


def _error_at(token: Token, message: str) -> SqlSyntaxError:
    return SqlSyntaxError(f"line {token.line}, column {token.column}: {message}", token.line,
                          token.column)


class _PrimaryKeyClause:
    """A table-level `PRIMARY KEY (a, b)` while its CREATE TABLE is being built."""

    __slots__ = ("token", "columns")

    def __init__(self, token: Token, columns: tuple[str, ...]) -> None:
        self.token = token
        self.columns = columns


def _unquote(token: Token) -> str:
    return token[1:-1].replace("''", "'")


@v_args(inline=True)
class _Builder(Transformer):
    """Builds ast nodes while the LALR parser reduces (one pass, no parse tree).

    Method names are the rule or alias names of the grammar. Optional parts arrive as None
    (lark's maybe_placeholders).
    """

    # --- script ---------------------------------------------------------------------------

    def script(self, *children: Any) -> list[tuple[ast.Statement, int, int | None]]:
        # Returns (statement, start, end) offsets so that `parse` can cut out each statement's
        # own text; `;` tokens are kept in the tree for exactly this.
        entries: list[tuple[ast.Statement, int, int | None]] = []
        statement = None
        start = 0
        for child in children:
            if isinstance(child, Token):
                if statement is not None:
                    entries.append((statement, start, child.start_pos))
                statement = None
                start = child.end_pos
            else:
                statement = child
        if statement is not None:
            entries.append((statement, start, None))
        return entries

    # --- names ------------------------------------------------------------------------------

    def ident(self, token: Token) -> str:
        if token.type == "QUOTED_IDENT":
            if len(token) == 2:
                raise _error_at(token, 'a quoted name cannot be empty: write at least one '
                                'character between the double quotes')
            return token[1:-1].replace('""', '"')
        return str(token)

    def table_name(self, name: str) -> str:
        return name

    column_name = database_name = user_name = setting_name = alias = table_name

    def function_name(self, name: str) -> str:
        return name.lower()

    def type_name(self, token: Token) -> str:
        return token.upper()

    # --- SELECT -----------------------------------------------------------------------------

    def select(self, distinct: bool | None, items: tuple[ast.SelectItem, ...],
               source: ast.Source | None, where: Expr | None, group_by: tuple[Expr, ...] | None,
               having: Expr | None, order_by: tuple[ast.OrderItem, ...] | None,
               limit_offset: tuple[Expr, Expr | None] | None) -> ast.Select:
        limit, offset = limit_offset or (None, None)
        return ast.Select(items, source, where, group_by or (), having, order_by or (), limit,
                          offset, distinct is not None)

    def subscribe(self, select: ast.Select) -> ast.Subscribe:
        return ast.Subscribe(select)

    def distinct(self) -> bool:
        return True

    def select_list(self, *items: ast.SelectItem) -> tuple[ast.SelectItem, ...]:
        return items

    def select_expr(self, expr: Expr, alias: str | None) -> ast.SelectItem:
        return ast.SelectItem(expr, alias)

    def select_star(self) -> ast.SelectItem:
        return ast.SelectItem(ast.Star())

    def select_table_star(self, table: str) -> ast.SelectItem:
        return ast.SelectItem(ast.Star(table))

    def from_clause(self, source: ast.Source) -> ast.Source:
        return source

    def table_source(self, name: str, alias: str | None) -> ast.TableSource:
        return ast.TableSource(name, alias)

    def function_source(self, name: str, args: tuple[Expr, ...] | None,
                        alias: str | None) -> ast.FunctionSource:
        return ast.FunctionSource(name, args or (), alias)

    def where(self, expr: Expr) -> Expr:
        return expr

    having = where

    def group_by(self, exprs: tuple[Expr, ...]) -> tuple[Expr, ...]:
        return exprs

    def order_by(self, *items: ast.OrderItem) -> tuple[ast.OrderItem, ...]:
        return items

    def order_item(self, expr: Expr, descending: bool | None,
                   nulls_first: bool | None) -> ast.OrderItem:
        return ast.OrderItem(expr, bool(descending), nulls_first)

    def asc(self) -> bool:
        return False

    def desc(self) -> bool:
        return True

    nulls_first = desc
    nulls_last = asc

    def limit(self, limit: Expr, offset: Expr | None) -> tuple[Expr, Expr | None]:
        return limit, offset

    def expr_list(self, *exprs: Expr) -> tuple[Expr, ...]:
        return exprs

    # --- expressions ----------------------------------------------------------------------

    def or_(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("OR", left, right)

    def and_(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("AND", left, right)

    def not_(self, operand: Expr) -> ast.Unary:
        return ast.Unary("NOT", operand)

    def negation(self) -> bool:
        return True

    def comparison(self, token: Token) -> str:
        return "<>" if token == "!=" else str(token)

    def compare(self, left: Expr, op: str, right: Expr) -> ast.Binary:
        return ast.Binary(op, left, right)

    def is_null(self, operand: Expr, negated: bool | None) -> ast.IsNull:
        return ast.IsNull(operand, negated is not None)

    def in_list(self, operand: Expr, negated: bool | None, items: tuple[Expr, ...]) -> ast.InList:
        return ast.InList(operand, items, negated is not None)

    def between(self, operand: Expr, negated: bool | None, low: Expr, high: Expr) -> ast.Between:
        return ast.Between(operand, low, high, negated is not None)

    def like(self, operand: Expr, negated: bool | None, pattern: Expr) -> ast.Like:
        return ast.Like(operand, pattern, negated is not None)

    def add(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("+", left, right)

    def sub(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("-", left, right)

    def concat(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("||", left, right)

    def mul(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("*", left, right)

    def div(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("/", left, right)

    def mod(self, left: Expr, right: Expr) -> ast.Binary:
        return ast.Binary("%", left, right)

    def neg(self, operand: Expr) -> Expr:
        # A minus before a number is folded into the literal, so that `-5` in VALUES is a
        # constant for the executor; the printer relies on Unary('-', number) never existing.
        if isinstance(operand, ast.Literal) and operand.type in ("INT", "DOUBLE"):
            return ast.Literal(-operand.value, operand.type)
        return ast.Unary("-", operand)

    def negative_number(self, token: Token) -> ast.Literal:
        literal = self.number(token)
        return ast.Literal(-literal.value, literal.type)

    def pos(self, operand: Expr) -> ast.Unary:
        return ast.Unary("+", operand)

    def number(self, token: Token) -> ast.Literal:
        if "." in token or "e" in token or "E" in token:
            return ast.Literal(float(token), "DOUBLE")
        try:
            return ast.Literal(int(token), "INT")
        except ValueError:  # Python refuses to convert more than 4300 digits
            raise _error_at(token, "this number has too many digits") from None

    def string(self, token: Token) -> ast.Literal:
        return ast.Literal(_unquote(token), "STRING")

    def true(self) -> ast.Literal:
        return ast.Literal(True, "BOOLEAN")

    def false(self) -> ast.Literal:
        return ast.Literal(False, "BOOLEAN")

    def null(self) -> ast.Literal:
        return ast.Literal(None, "NULL")

    def param(self) -> ast.Param:
        index = _local.params
        _local.params = index + 1
        return ast.Param(index)

    def column(self, name: str) -> ast.ColumnRef:
        return ast.ColumnRef(name)

    def qualified_column(self, table: str, name: str) -> ast.ColumnRef:
        return ast.ColumnRef(name, table)

    def call(self, name: str, args: tuple[Expr, ...] | None) -> ast.FuncCall:
        return ast.FuncCall(name.lower(), args or ())

    def call_star(self, name: str) -> ast.FuncCall:
        return ast.FuncCall(name.lower(), (), star=True)

    def call_distinct(self, name: str, args: tuple[Expr, ...]) -> ast.FuncCall:
        return ast.FuncCall(name.lower(), args, distinct=True)

    def case(self, operand: Expr | None, *rest: Any) -> ast.Case:
        return ast.Case(operand, rest[:-1], rest[-1])

    def when(self, condition: Expr, result: Expr) -> tuple[Expr, Expr]:
        return condition, result

    def cast(self, operand: Expr, type_: str) -> ast.Cast:
        return ast.Cast(operand, type_)

    # --- data changes -----------------------------------------------------------------------

    def insert(self, table: str, columns: tuple[str, ...] | None, body: Any) -> ast.Insert:
        if isinstance(body, ast.Select):
            return ast.Insert(table, columns, select=body)
        return ast.Insert(table, columns, rows=body)

    def column_list(self, *names: str) -> tuple[str, ...]:
        return names

    column_names = column_list

    def values(self, *rows: tuple[Expr, ...]) -> tuple[tuple[Expr, ...], ...]:
        return rows

    def row(self, *exprs: Expr) -> tuple[Expr, ...]:
        return exprs

    def update(self, table: str, *rest: Any) -> ast.Update:
        return ast.Update(table, rest[:-1], rest[-1])

    def assignment(self, column: str, expr: Expr) -> tuple[str, Expr]:
        return column, expr

    def delete(self, table: str, where: Expr | None) -> ast.Delete:
        return ast.Delete(table, where)

    # --- schema ---------------------------------------------------------------------------

    def create_table(self, if_not_exists: bool | None, name: str, *rest: Any) -> ast.CreateTable:
        *elements, timeseries, partition, sort_by, dedup_key = rest
        columns: list[ast.ColumnDef] = []
        primary_key: tuple[str, ...] = ()
        key_token = None
        for element in elements:
            if isinstance(element, _PrimaryKeyClause):
                token, keys = element.token, element.columns
            else:
                column, token = element
                columns.append(column)
                if token is None:
                    continue
                keys = (column.name,)
            if key_token is not None:
                raise _error_at(token, "a table has one primary key: declare a key of several "
                                "columns as PRIMARY KEY (a, b) after the columns")
            key_token, primary_key = token, keys
        if not columns:
            raise _error_at(key_token, "a table needs at least one column")
        unit, symbol = partition or (None, None)
        return ast.CreateTable(name, tuple(columns), if_not_exists is not None, primary_key,
                               timeseries, unit, symbol, sort_by or (), dedup_key or ())

    def column_def(self, name: str, type_: str,
                   primary: Token | None) -> tuple[ast.ColumnDef, Token | None]:
        return ast.ColumnDef(name, type_), primary

    def column_primary_key(self, token: Token) -> Token:
        return token

    def primary_key_def(self, token: Token, columns: tuple[str, ...]) -> _PrimaryKeyClause:
        return _PrimaryKeyClause(token, columns)

    def timeseries(self, column: str) -> str:
        return column

    def partition_by(self, unit: str, symbol: str | None) -> tuple[str, str | None]:
        return unit, symbol

    def partition_unit(self, token: Token) -> str:
        return token.upper()

    role = partition_unit

    def sort_by(self, columns: tuple[str, ...]) -> tuple[str, ...]:
        return columns

    dedup_key = sort_by

    def if_exists(self) -> bool:
        return True

    if_not_exists = if_exists

    def drop_table(self, if_exists: bool | None, name: str) -> ast.DropTable:
        return ast.DropTable(name, if_exists is not None)

    def truncate(self, name: str) -> ast.Truncate:
        return ast.Truncate(name)

    def add_column(self, table: str, column: str, type_: str) -> ast.AddColumn:
        return ast.AddColumn(table, ast.ColumnDef(column, type_))

    def drop_column(self, table: str, column: str) -> ast.DropColumn:
        return ast.DropColumn(table, column)

    def drop_partition_list(self, table: str, *names: Token) -> ast.DropPartitionList:
        return ast.DropPartitionList(table, tuple(_unquote(name) for name in names))

    def drop_partition_where(self, table: str, where: Expr) -> ast.DropPartitionWhere:
        return ast.DropPartitionWhere(table, where)

    def create_database(self, if_not_exists: bool | None, name: str) -> ast.CreateDatabase:
        return ast.CreateDatabase(name, if_not_exists is not None)

    def drop_database(self, if_exists: bool | None, name: str) -> ast.DropDatabase:
        return ast.DropDatabase(name, if_exists is not None)

    def alter_database(self, name: str, setting: str, value: str) -> ast.AlterDatabaseSet:
        return ast.AlterDatabaseSet(name, setting.lower(), value)

    def setting_string(self, token: Token) -> str:
        return _unquote(token)

    def setting_number(self, token: Token) -> str:
        return str(token)

    # --- transactions, maintenance, catalog -------------------------------------------------

    def begin(self) -> ast.Begin:
        return ast.Begin()

    def commit(self) -> ast.Commit:
        return ast.Commit()

    def rollback(self) -> ast.Rollback:
        return ast.Rollback()

    def checkpoint(self) -> ast.Checkpoint:
        return ast.Checkpoint()

    def show_tables(self) -> ast.ShowTables:
        return ast.ShowTables()

    def show_columns(self, table: str) -> ast.ShowColumns:
        return ast.ShowColumns(table)

    def show_create_table(self, table: str) -> ast.ShowCreateTable:
        return ast.ShowCreateTable(table)

    def show_users(self) -> ast.ShowUsers:
        return ast.ShowUsers()

    def show_grants(self, user: str) -> ast.ShowGrants:
        return ast.ShowGrants(user)

    # --- users, tokens, rights --------------------------------------------------------------

    def create_user(self, if_not_exists: bool | None, name: str) -> ast.CreateUser:
        return ast.CreateUser(name, if_not_exists is not None)

    def drop_user(self, if_exists: bool | None, name: str) -> ast.DropUser:
        return ast.DropUser(name, if_exists is not None)

    def create_token(self, user: str, expires: Token | None) -> ast.CreateToken:
        return ast.CreateToken(user, None if expires is None else _unquote(expires))

    def drop_token(self, token: Token) -> ast.DropToken:
        return ast.DropToken(token=_unquote(token))

    def drop_token_for(self, user: str) -> ast.DropToken:
        return ast.DropToken(user=user)

    def grant_role(self, role: str, database: str, grantee: str) -> ast.GrantRole:
        return ast.GrantRole(role, database, grantee)

    def revoke_role(self, role: str, database: str, grantee: str) -> ast.RevokeRole:
        return ast.RevokeRole(role, database, grantee)

    def grant_select(self, table: str, grantee: str) -> ast.GrantSelect:
        return ast.GrantSelect(table, grantee)

    def revoke_select(self, table: str, grantee: str) -> ast.RevokeSelect:
        return ast.RevokeSelect(table, grantee)

    def grantee(self, name: str) -> str:
        return name

    def public(self) -> str:
        return ast.PUBLIC


_GRAMMAR = resources.files("refimpl").joinpath("grammar.lark").read_text(encoding="utf-8")

# One parser for the process: LALR tables and lexers are immutable after construction, and the
# embedded transformer builds nodes during the parse (no intermediate tree).
_LARK = Lark(
    _GRAMMAR,
    start="script",
    parser="lalr",
    lexer="contextual",
    maybe_placeholders=True,
    transformer=_Builder(),
    # ASCII: otherwise case-insensitive matching lets 'ſelect' (long s) read as SELECT.
    g_regex_flags=re.ASCII,
)


def parse(text: str) -> ast.ParsedScript:
    """Parse a script of `;`-separated statements; raise SqlSyntaxError if it is not valid."""
    _local.params = 0
    try:
        entries = _LARK.parse(text)
    except UnexpectedInput as error:
        raise _syntax_error(error, text) from None
    return ast.ParsedScript(
        tuple(entry[0] for entry in entries),
        _local.params,
        tuple(text[start:end].strip() for _, start, end in entries),
    )


@functools.lru_cache(maxsize=2048)
def parse_cached(text: str) -> ast.ParsedScript:
    """`parse` with a process-wide LRU cache keyed by the exact text (errors are not cached)."""
    return parse(text)


# ---------------------------------------------------------------------------------------
# Keyword sets (derived from the grammar, so they cannot drift from it)
# ---------------------------------------------------------------------------------------


def _string_terminals() -> dict[str, str]:
    """Terminal name -> the literal text of every terminal that is a fixed string."""
    return {t.name: t.pattern.value for t in _LARK.terminals if isinstance(t.pattern, PatternStr)}


_LITERALS = _string_terminals()

RESERVED_WORDS: frozenset[str] = frozenset(
    word.upper()
    for word in re.search(r"\(\?!\(\?:([a-z|]+)\)", _LARK.get_terminal("IDENT").pattern.value)
    .group(1)
    .split("|")
)
KEYWORDS: frozenset[str] = frozenset(
    value.upper() for value in _LITERALS.values() if value.isalpha()
) | RESERVED_WORDS
NAME_KEYWORDS: frozenset[str] = frozenset(
    _LITERALS[rule.expansion[0].name].upper()
    for rule in _LARK.rules
    if rule.origin.name == "ident" and rule.expansion[0].name in _LITERALS
)

# ---------------------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------------------

_UNSUPPORTED = {
    "JOIN": "JOIN is not supported: a query reads a single table",
    "UNION": "UNION is not supported: a query reads a single table",
    "INTERSECT": "INTERSECT is not supported: a query reads a single table",
    "EXCEPT": "EXCEPT is not supported: a query reads a single table",
    "WITH": "WITH (common table expressions) is not supported: a query reads a single table",
}
_JOIN_PREFIXES = {"INNER", "OUTER", "LEFT", "RIGHT", "FULL", "CROSS", "NATURAL"}
_SUBQUERY = "subqueries are not supported: a query reads a single table"

# What a person calls the input that a nonterminal begins. None hides optional modifiers (IF
# EXISTS, DISTINCT, ...) that would only make the message longer.
_RULE_WORDS: dict[str, str | None] = {
    "table_name": "a table name",
    "source": "a table name",
    "column_name": "a column name",
    "column_def": "a column name",
    "table_element": "a column name",
    "column_names": "a column name",
    "assignment": "a column name",
    "database_name": "a database name",
    "user_name": "a user name",
    "grantee": "a user name or PUBLIC",
    "alias": "an alias",
    "setting_name": "a setting name",
    "type_name": "a type such as INT or STRING",
    "statement": "a keyword such as SELECT or INSERT",
    "select_list": "an expression",
    "select_item": "an expression",
    "order_item": "an expression",
    "expr_list": "an expression",
    "if_exists": None,
    "if_not_exists": None,
    "distinct": None,
    "primary_key_def": None,
}
for _name in ("expr", "or_expr", "and_expr", "not_expr", "predicate", "sum", "product", "unary",
              "atom"):
    _RULE_WORDS[_name] = "an expression"

_EXPRESSION_STARTS = {"NUMBER", "STRING", "QMARK", "CASE", "CAST", "TRUE", "FALSE", "NULL",
                      "NOT", "LPAR", "MINUS", "PLUS"}
_OPERATOR_TEXT = {"=", "<>", "!=", "<", "<=", ">", ">=", "+", "-", "||", "*", "/", "%", "AND",
                  "OR", "IS", "IN", "NOT", "BETWEEN", "LIKE"}
_TYPE_WORDS = set(ast.TYPES)
_STATEMENT_WORDS = {"SELECT", "INSERT", "CREATE", "UPDATE", "DELETE"}
_KEYWORD_PHRASES = {
    "GROUP": "GROUP BY",
    "ORDER": "ORDER BY",
    "PARTITION": "PARTITION BY",
    "SORT": "SORT BY",
    "DEDUP": "DEDUP KEY",
    "PRIMARY": "PRIMARY KEY",
}
_ENDS = {"SEMI", "$END"}
_CLAUSES = ["FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT"]
_STATEMENT_STARTS = {"SELECT", "SUBSCRIBE", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP",
                     "ALTER", "TRUNCATE", "BEGIN", "COMMIT", "ROLLBACK", "CHECKPOINT", "SHOW",
                     "GRANT", "REVOKE"}


def _terminal_text(name: str) -> str | None:
    """The literal text of a terminal, upper case for keywords; None for patterns."""
    value = _LITERALS.get(name)
    if value is None:
        return None
    return value.upper() if value.isalpha() else value


_NAME_TERMINALS = {"IDENT", "QUOTED_IDENT"} | {
    name for name in _LITERALS if (_terminal_text(name) or "") in NAME_KEYWORDS
}


def _join_words(parts: list[str]) -> str:
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _summarise_terminals(names: set[str]) -> list[str]:
    """Readable words for a set of expected terminals, most telling first."""
    parts: list[str] = []
    texts = {name: _terminal_text(name) for name in names}
    if {"NUMBER", "STRING"} <= names:
        parts.append("an expression")
        names = {n for n in names if n not in _EXPRESSION_STARTS and n not in _NAME_TERMINALS}
    operators = {n for n in names if texts[n] in _OPERATOR_TEXT}
    if len(operators) >= 2:
        # AND without OR is the AND of BETWEEN, which deserves to be named.
        if any(texts[n] == "AND" for n in operators) and not any(texts[n] == "OR" for n in names):
            parts.append("AND")
        parts.append("an operator")
        names -= operators
    if _STATEMENT_WORDS <= {texts[n] for n in names}:
        return ["a keyword such as SELECT or INSERT"]
    if "IDENT" in names:
        parts.append("an alias" if any(texts[n] == "AS" for n in names) else "a name")
        names -= _NAME_TERMINALS
    if _TYPE_WORDS <= {texts[n] for n in names}:
        parts.append("a type such as INT or STRING")
        names = {n for n in names if texts[n] not in _TYPE_WORDS}
    clauses = [n for n in names if texts[n] in _CLAUSES]
    if len(clauses) >= 3:
        clauses.sort(key=lambda n: _CLAUSES.index(texts[n]))
        first, second = (_KEYWORD_PHRASES.get(texts[n], texts[n]) for n in clauses[:2])
        parts.append(f"a clause ({first}, {second}, ...)")
        names -= set(clauses)
    words = []
    for name in names - _ENDS:
        text = texts[name]
        if text is None:
            if name == "STRING":
                words.append("a string such as 'abc'")
            elif name == "NUMBER":
                words.append("a number")
            continue  # other pattern terminals have no words a person would recognise
        if text.isalpha():
            words.append(_KEYWORD_PHRASES.get(text, text))
        else:
            words.append(f"'{text}'")
    parts.extend(sorted(words, key=lambda w: (w[0] != "'", w)))
    if names & _ENDS:
        parts.append("the end of the statement")
    return parts


@functools.cache
def _analysis() -> tuple[dict[int, list[Any]], dict[str, set[str]]] | None:
    """LALR items of every parser state, and FIRST sets of every nonterminal.

    lark keeps only the action table; the items (what the parser is in the middle of) are
    rebuilt here once, on the first syntax error, by running lark's own analysis again and
    pairing its states with lark's numbered states along identical transitions. None if the
    two do not line up (a future lark), in which case messages fall back to terminal names.
    """
    try:
        from lark.common import ParserConf
        from lark.parsers.lalr_analysis import LALR_Analyzer, Shift

        # debug=True keeps the item sets as the keys of the table instead of numbering them.
        analyzer = LALR_Analyzer(ParserConf(_LARK.rules, {}, ["script"]), debug=True)
        analyzer.compute_lalr()
        mine = analyzer.parse_table
        theirs = _LARK.parser.parser._parse_table  # type: ignore[attr-defined]
        pairs = {theirs.start_states["script"]: mine.start_states["script"]}
        todo = list(pairs.items())
        while todo:
            number, state = todo.pop()
            actions, my_actions = theirs.states[number], mine.states[state]
            if actions.keys() != my_actions.keys():
                return None
            for symbol, (action, target) in actions.items():
                if action is Shift:
                    my_target = my_actions[symbol][1]
                    if target not in pairs:
                        pairs[target] = my_target
                        todo.append((target, my_target))
                    elif pairs[target] != my_target:
                        return None
        items = {
            number: [item for item in state
                     if item.index > 0 or item.rule.origin.name.startswith("$root")]
            for number, state in pairs.items()
        }
    except Exception:  # only the wording of an error message depends on this
        return None

    first: dict[str, set[str]] = {}
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in _LARK.rules:
            origin = rule.origin.name
            found = first.setdefault(origin, set())
            before = len(found)
            all_nullable = True
            for symbol in rule.expansion:
                if symbol.is_term:
                    found.add(symbol.name)
                    all_nullable = False
                    break
                found |= first.get(symbol.name, set())
                if symbol.name not in nullable:
                    all_nullable = False
                    break
            if all_nullable and origin not in nullable:
                nullable.add(origin)
                changed = True
            changed |= len(found) != before
    return items, first


def _expected_words(state: int | None, expected: set[str]) -> str:
    """What may come next, in words: the kinds of input the parser is in the middle of (a table
    name, a column name, an expression), then whatever else the expected terminals allow."""
    parts: list[str] = []
    remaining = set(expected)
    analysis = _analysis() if state is not None else None
    if analysis is not None:
        items, first = analysis
        for item in items.get(state, ()):
            if item.is_satisfied:
                continue
            symbol = item.next
            if symbol.is_term or symbol.name not in _RULE_WORDS:
                continue
            starts = first.get(symbol.name, set())
            if not starts & remaining:
                continue
            remaining -= starts
            words = _RULE_WORDS[symbol.name]
            if words is not None and words not in parts:
                parts.append(words)
    if "a keyword such as SELECT or INSERT" in parts:
        remaining -= _ENDS
    parts.extend(p for p in _summarise_terminals(remaining) if p not in parts)
    return _join_words(parts)


def _show(text: str) -> str:
    """A piece of the statement, quoted for a message (a string literal says it is one)."""
    text = " ".join(text.split())
    if len(text) > 40:
        text = text[:37] + "..."
    return f"the string {text}" if text.startswith("'") else f"'{text}'"


# Skips whole strings, quoted names and comments; group 1 catches an opener left unclosed.
_UNTERMINATED = re.compile(
    r"""'[^']*(?:''[^']*)*'|"[^"]*(?:""[^"]*)*"|--[^\n]*|/\*.*?\*/|(['"]|/\*)""", re.S)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _unterminated(text: str, before: int) -> tuple[int, str] | None:
    """The first string, quoted name or comment that is never closed, if it starts by `before`."""
    for match in _UNTERMINATED.finditer(text):
        if match.start() > before:
            return None
        opener = match.group(1)
        if opener:
            what = {"'": "string literal", '"': "quoted name"}.get(opener, "comment")
            return match.start(), f"unterminated {what} starting here"
    return None


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _make(text: str, offset: int, message: str) -> SqlSyntaxError:
    line, column = _position(text, offset)
    return SqlSyntaxError(f"line {line}, column {column}: {message}", line, column)


def _syntax_error(error: UnexpectedInput, text: str) -> SqlSyntaxError:
    """Turn lark's exception into one sentence with the line and column of the culprit."""
    interactive = getattr(error, "interactive_parser", None)
    state = interactive.parser_state if interactive is not None else None
    stack = list(state.value_stack) if state is not None else []
    previous = stack[-1] if stack and isinstance(stack[-1], Token) else None
    at_end = isinstance(error, UnexpectedEOF) or (
        isinstance(error, UnexpectedToken) and error.token.type == "$END")

    if at_end:
        offset = len(text.rstrip())
    elif isinstance(error, UnexpectedToken):
        offset = error.token.start_pos
    else:
        offset = error.pos_in_stream
    found = _unterminated(text, offset if not at_end else len(text))
    if found is not None:
        return _make(text, *found)

    # Words and shapes of SQL that this database deliberately does not have.
    match = _WORD.match(text, offset)
    word = match.group().upper() if match else ""
    prev_text = previous.upper() if previous is not None else ""
    if word in _JOIN_PREFIXES or word == "JOIN":
        after = _WORD.search(text, match.end())  # type: ignore[union-attr]
        if word == "JOIN" or (after and after.group().upper() in ("JOIN", "OUTER")):
            # `FROM a LEFT JOIN b` reads LEFT as the alias of a: point at LEFT, not JOIN.
            before = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\Z", text[:offset])
            start = offset
            if before and before.group(1).upper() in _JOIN_PREFIXES:
                start = before.start(1)
            return _make(text, start, _UNSUPPORTED["JOIN"])
    if word in _UNSUPPORTED:
        return _make(text, offset, _UNSUPPORTED[word])
    if (text.startswith("(", offset) and prev_text == "FROM") or (
            word == "SELECT" and prev_text == "("):
        return _make(text, offset, _SUBQUERY)
    if text.startswith(",", offset):
        recent = [v.upper() for v in stack[-4:] if isinstance(v, Token)]
        if "LIMIT" in recent:
            return _make(text, offset, "LIMIT m, n is not supported: write LIMIT n OFFSET m")
        if "FROM" in recent or any(isinstance(v, (ast.TableSource, ast.FunctionSource))
                                   for v in stack[-2:]):
            return _make(text, offset, "a query reads a single table: several tables in FROM "
                         "(a join) are not supported")

    if isinstance(error, UnexpectedToken):
        found_text = str(error.token)
    elif match:
        found_text = match.group()  # a reserved word that no rule takes (ALL, say)
    else:
        char = text[offset]
        shown = _show(char) if char.isprintable() else f"U+{ord(char):04X}"
        return _make(text, offset, f"unexpected character {shown}")

    if interactive is not None:
        # accepts() tries every terminal on a copy of the parser, so LALR's merged look-aheads
        # do not leak into the message: only what can really come next is listed.
        position = state.position
        expected = set(interactive.accepts())
    else:
        position = None
        expected = set(getattr(error, "expected", ()) or ())
    if "SEMI" in expected and found_text.upper() in _STATEMENT_STARTS:
        return _make(text, offset, f"expected ';' before {_show(found_text)}: statements are "
                     "separated by ';'")
    words = _expected_words(position, expected)
    if at_end:
        message = "unexpected end of input"
        return _make(text, offset, f"{message}: expected {words}" if words else message)
    after = f" after {_show(previous)}" if previous is not None else ""
    if not words:
        return _make(text, offset, f"unexpected {_show(found_text)}{after}")
    return _make(text, offset, f"expected {words}{after} but found {_show(found_text)}")

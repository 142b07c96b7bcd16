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
* Both take an optional `deadline` (`time.monotonic()` seconds): a parse still running then
  raises StatementTimeout. A statement nested deeper than `MAX_DEPTH`, or with a list longer
  than the builder's limits, raises StatementTooLarge: every later step (compiling,
  printing, hashing) walks expressions recursively, and this bound keeps them within
  Python's recursion limit.
* Both are thread-safe: the lark parser is built once at import and is immutable.

Keyword handling (see the top of `refimpl/grammar.lark`): `RESERVED_WORDS` are never names
unless quoted; `NAME_KEYWORDS` are keywords that also work as bare names everywhere; any other
word in `KEYWORDS` must be quoted where it is meant as a name. `refimpl.sql.printer` uses these
sets to decide when a name needs quotes.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import cast

from lark import Lark, Token
from lark.exceptions import UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.lexer import PatternStr

from refimpl.errors import SqlSyntaxError
from refimpl.sql import ast, ast_types, builder
from refimpl.sql.builder import Builder, parameters
from refimpl.sql.limits import MAX_DEPTH, check_depth

__all__ = [
    "KEYWORDS",
    "MAX_DEPTH",
    "NAME_KEYWORDS",
    "RESERVED_WORDS",
    "parse",
    "parse_cached",
]

_GRAMMAR = resources.files("refimpl").joinpath("grammar.lark").read_text(encoding="utf-8")

# One parser for the process: LALR tables and lexers are immutable after construction, and the
# embedded transformer builds nodes during the parse (no intermediate tree).
_LARK = Lark(
    _GRAMMAR,
    start="script",
    parser="lalr",
    lexer="contextual",
    maybe_placeholders=True,
    transformer=Builder(),
    # ASCII: otherwise case-insensitive matching lets 'ſelect' (long s) read as SELECT.
    g_regex_flags=re.ASCII,
)


def parse(text: str, deadline: float | None = None) -> ast.ParsedScript:
    """Parse a script of `;`-separated statements; raise SqlSyntaxError if it is not valid."""
    builder.start(deadline)
    try:
        # The inline transformer (`builder`) makes (statement, start, end) entries of the tree.
        entries = cast("list[tuple[ast.Statement, int, int]]", _LARK.parse(text))
    except UnexpectedInput as error:
        raise _syntax_error(error, text) from None
    statements = tuple(entry[0] for entry in entries)
    for statement in statements:
        check_depth(statement)
    return ast.ParsedScript(
        statements,
        parameters.count,
        tuple(text[start:end].strip() for _, start, end in entries),
    )


def parse_cached(text: str, deadline: float | None = None) -> ast.ParsedScript:
    """`parse` with a process-wide LRU cache keyed by the exact text (errors are not cached)."""
    # The deadline is not part of the cache key: it goes to the parse through this thread's
    # state, read only when the text is not in the cache.
    parameters.pending_deadline = deadline
    return _parse_shared(text)


@functools.lru_cache(maxsize=2048)
def _parse_shared(text: str) -> ast.ParsedScript:
    return parse(text, parameters.pending_deadline)


# ---------------------------------------------------------------------------------------
# Keyword sets (derived from the grammar, so they cannot drift from it)
# ---------------------------------------------------------------------------------------


def _string_terminals() -> dict[str, str]:
    """Terminal name -> the literal text of every terminal that is a fixed string."""
    return {t.name: t.pattern.value for t in _LARK.terminals if isinstance(t.pattern, PatternStr)}


_LITERALS = _string_terminals()

_RESERVED = re.search(r"\(\?!\(\?:([a-z|]+)\)", _LARK.get_terminal("IDENT").pattern.value)
assert _RESERVED is not None  # IDENT's pattern starts with its reserved words' look-ahead
RESERVED_WORDS: frozenset[str] = frozenset(word.upper() for word in _RESERVED.group(1).split("|"))
KEYWORDS: frozenset[str] = (
    frozenset(value.upper() for value in _LITERALS.values() if value.isalpha()) | RESERVED_WORDS
)
NAME_KEYWORDS: frozenset[str] = frozenset(
    _LITERALS[rule.expansion[0].name].upper()
    for rule in _LARK.rules
    if rule.origin.name == "ident" and rule.expansion[0].name in _LITERALS
)

# ---------------------------------------------------------------------------------------
# Error messages
# ---------------------------------------------------------------------------------------

# What a person calls the input that a nonterminal begins. None hides optional modifiers (IF
# EXISTS, DISTINCT, ...) that would only make the message longer.
_RULE_WORDS: dict[str, str | None] = {
    "table_name": "a table name",
    "source": "a table name",
    "joined": "a table name",
    "query": "a query (SELECT, VALUES or WITH)",
    "quantifier": None,
    "join_type": None,
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
for _name in (
    "expr",
    "or_expr",
    "and_expr",
    "not_expr",
    "predicate",
    "bits",
    "sum",
    "product",
    "unary",
    "atom",
):
    _RULE_WORDS[_name] = "an expression"

_EXPRESSION_STARTS = {
    "NUMBER",
    "STRING",
    "BLOB_STRING",
    "QMARK",
    "CASE",
    "CAST",
    "TRUE",
    "FALSE",
    "NULL",
    "NOT",
    "LPAR",
    "MINUS",
    "PLUS",
    "EXISTS",
    "ANY",
    "SOME",
    "ALL",
    "ARRAY",
}
# The PostgreSQL spellings (`::`, `~`, COLLATE, OPERATOR(...), a subscript's `[`) count as
# operators too: they may follow any expression, and naming each would bury the operators
# people mean.
_OPERATOR_TEXT = {
    "=",
    "<>",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "+",
    "-",
    "||",
    "*",
    "/",
    "%",
    "AND",
    "<<",
    ">>",
    "&",
    "|",
    "OR",
    "IS",
    "IN",
    "NOT",
    "BETWEEN",
    "LIKE",
    "ISNULL",
    "NOTNULL",
    "::",
    "~",
    "~*",
    "!~",
    "!~*",
    "COLLATE",
    "OPERATOR",
    "[",
}
_TYPE_WORDS = set(ast.TYPES)
_ALIAS_WORDS = (
    set(ast.TYPE_ALIASES) | set(ast_types.UNSUPPORTED_TYPES) | set(ast_types.FUNCTION_CASTS)
)
_STATEMENT_WORDS = {"SELECT", "INSERT", "CREATE", "UPDATE", "DELETE"}
_KEYWORD_PHRASES = {
    "GROUP": "GROUP BY",
    "ORDER": "ORDER BY",
    "PARTITION": "PARTITION BY",
    "SORT": "SORT BY",
    "DEDUP": "DEDUP KEY",
    "PRIMARY": "PRIMARY KEY",
    "CROSS": "CROSS JOIN",
}
_ENDS = {"SEMI", "$END"}
_CLAUSES = ["FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT"]
# Words that may follow a table or a whole SELECT, named only when no clause is (they would
# make the list of what may follow a FROM long without telling much).
_CLAUSE_LIKE = {
    "CROSS",
    "NATURAL",
    "JOIN",
    "INNER",
    "LEFT",
    "RIGHT",
    "FULL",
    "UNION",
    "INTERSECT",
    "EXCEPT",
    "NOT",
}  # NOT of SQLite's `FROM t NOT INDEXED`
_STATEMENT_STARTS = {
    "SELECT",
    "SUBSCRIBE",
    "INSERT",
    "UPDATE",
    "DELETE",
    "CREATE",
    "DROP",
    "ALTER",
    "TRUNCATE",
    "BEGIN",
    "COMMIT",
    "ROLLBACK",
    "CHECKPOINT",
    "SHOW",
    "GRANT",
    "REVOKE",
    "CALL",
}


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
        names = {n for n in names if texts[n] not in _TYPE_WORDS | _ALIAS_WORDS}
    clauses = [n for n in names if texts[n] in _CLAUSES]
    if len(clauses) >= 3:
        clause_words = sorted((texts[n] or "" for n in clauses), key=_CLAUSES.index)
        first, second = (_KEYWORD_PHRASES.get(w, w) for w in clause_words[:2])
        parts.append(f"a clause ({first}, {second}, ...)")
        names -= set(clauses)
        names = {n for n in names if texts[n] not in _CLAUSE_LIKE}
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


# An LR(0) item: a rule (its origin and its symbols, each a name and whether it is a terminal)
# with the dot before symbol `dot`.
_Symbol = tuple[str, bool]
_Item = tuple[str, tuple[_Symbol, ...], int]
_ROOT: _Item = ("$root_script", (("script", False), ("$END", True)), 0)


@functools.cache
def _grammar_facts() -> tuple[dict[str, list[tuple[_Symbol, ...]]], dict[str, set[str]]]:
    """Every rule's symbols by the rule's name, and the FIRST set of every nonterminal."""
    expansions: dict[str, list[tuple[_Symbol, ...]]] = {}
    for rule in _LARK.rules:
        symbols = tuple((symbol.name, symbol.is_term) for symbol in rule.expansion)
        expansions.setdefault(rule.origin.name, []).append(symbols)

    first: dict[str, set[str]] = {}
    nullable: set[str] = set()
    changed = True
    while changed:
        changed = False
        for origin, alternatives in expansions.items():
            found = first.setdefault(origin, set())
            before = len(found)
            for symbols in alternatives:
                all_nullable = True
                for name, is_term in symbols:
                    if is_term:
                        found.add(name)
                        all_nullable = False
                        break
                    found |= first.get(name, set())
                    if name not in nullable:
                        all_nullable = False
                        break
                if all_nullable and origin not in nullable:
                    nullable.add(origin)
                    changed = True
            changed |= len(found) != before
    return expansions, first


def _closure(kernel: list[_Item]) -> list[_Item]:
    expansions = _grammar_facts()[0]
    items = list(kernel)
    expanded: set[str] = set()
    for _origin, symbols, dot in items:  # grows while it is walked: a worklist
        if dot < len(symbols) and not symbols[dot][1] and symbols[dot][0] not in expanded:
            name = symbols[dot][0]
            expanded.add(name)
            items.extend((name, alternative, 0) for alternative in expansions.get(name, ()))
    return items


def _kernel_items(stack: list[int]) -> list[_Item] | None:
    """What the parser is in the middle of in the state on top of `stack`: that state's kernel
    items, rebuilt along the stack's own path from the start state.

    lark keeps only the action table, not the items. The automaton is deterministic, so the
    kernel of each state on the stack follows from its predecessor's items and the one symbol
    whose transition leads from one to the other; this costs a closure per stack entry instead
    of rebuilding the whole LALR analysis. None if lark's table does not line up (a future
    lark), in which case messages fall back to terminal names.
    """
    from lark.parsers.lalr_analysis import Shift

    table = _LARK.parser.parser._parse_table
    if not stack or stack[0] != table.start_states["script"]:
        return None
    kernel = [_ROOT]
    for previous, current in zip(stack, stack[1:], strict=False):
        symbol = next(
            (
                name
                for name, (action, target) in table.states[previous].items()
                if action is Shift and target == current
            ),
            None,
        )
        if symbol is None:
            return None
        kernel = [
            (origin, symbols, dot + 1)
            for origin, symbols, dot in _closure(kernel)
            if dot < len(symbols) and symbols[dot][0] == symbol
        ]
        if not kernel:
            return None
    return kernel


def _expected_words(stack: list[int] | None, expected: set[str]) -> str:
    """What may come next, in words: the kinds of input the parser is in the middle of (a table
    name, a column name, an expression), then whatever else the expected terminals allow."""
    parts: list[str] = []
    remaining = set(expected)
    items = _kernel_items(stack) if stack is not None else None
    first = _grammar_facts()[1]
    for _origin, symbols, dot in items or ():
        if dot == len(symbols):
            continue
        name, is_term = symbols[dot]
        if is_term or name not in _RULE_WORDS:
            continue
        starts = first.get(name, set())
        if not starts & remaining:
            continue
        remaining -= starts
        words = _RULE_WORDS[name]
        if words is not None and words not in parts:
            parts.append(words)
    # A query, the rarer thing to mean, goes last.
    parts.sort(key=lambda words: words == _RULE_WORDS["query"])
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
    r"""'[^']*(?:''[^']*)*'|"[^"]*(?:""[^"]*)*"|--[^\n]*|/\*.*?\*/|(['"]|/\*)""", re.S
)
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
        isinstance(error, UnexpectedToken) and error.token.type == "$END"
    )

    if at_end:
        offset = len(text.rstrip())
    elif isinstance(error, UnexpectedToken):
        assert error.token.start_pos is not None  # LALR tokens carry their place
        offset = error.token.start_pos
    else:
        assert error.pos_in_stream is not None  # set on every error lark raises
        offset = error.pos_in_stream
    found = _unterminated(text, offset if not at_end else len(text))
    if found is not None:
        return _make(text, *found)

    # Words and shapes of SQL that this database deliberately does not have.
    match = _WORD.match(text, offset)
    if text.startswith(",", offset):
        recent = [v.upper() for v in stack[-4:] if isinstance(v, Token)]
        if "LIMIT" in recent:
            return _make(text, offset, "LIMIT m, n is not supported: write LIMIT n OFFSET m")

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
        states = list(interactive.parser_state.state_stack)
        expected = set(interactive.accepts())
    else:
        states = None
        expected = set(getattr(error, "expected", ()) or ())
    if "SEMI" in expected and found_text.upper() in _STATEMENT_STARTS:
        return _make(
            text,
            offset,
            f"expected ';' before {_show(found_text)}: statements are separated by ';'",
        )
    words = _expected_words(states, expected)
    if at_end:
        message = "unexpected end of input"
        return _make(text, offset, f"{message}: expected {words}" if words else message)
    after = f" after {_show(previous)}" if previous is not None else ""
    if not words:
        return _make(text, offset, f"unexpected {_show(found_text)}{after}")
    return _make(text, offset, f"expected {words}{after} but found {_show(found_text)}")


_WARM_UP = (
    "CREATE TABLE IF NOT EXISTS t (a INT PRIMARY KEY, b STRING, c DOUBLE, d TIMESTAMP,"
    " e SYMBOL, f BOOLEAN, g BIGINT) TIMESERIES(d) PARTITION BY DAY, SYMBOL(e)"
    " SORT BY (e, d) DEDUP KEY (e, d)",
    "INSERT INTO t (a, b) VALUES (1, 'x'), (-2, NULL), (?, TRUE)",
    "INSERT INTO t SELECT * FROM u WHERE a > 1",
    "SELECT DISTINCT a AS x, count(*), sum(c), first(c) FROM t AS s WHERE a = 1 AND b <> 'x'"
    " OR NOT c >= 1.5 AND b LIKE 'a%' AND a IN (1, 2) AND c BETWEEN 1 AND 2 AND b IS NOT NULL"
    " GROUP BY x, 2 HAVING count(*) > 1 ORDER BY x DESC NULLS LAST, 2 LIMIT 10 OFFSET 2",
    "SELECT date_trunc('minute', d) AS m, CASE WHEN a > 1 THEN 'y' ELSE 'n' END,"
    " CAST(a AS DOUBLE), coalesce(b, 'z') || 'q', a * 2 + c / 3 - a % 4, kdb_rev('t', 'v')"
    " FROM changes('t', 1, 10) WHERE lsn > 1 GROUP BY m ORDER BY m",
    "SUBSCRIBE SELECT a FROM t WHERE e = 'NABIL'",
    "UPDATE t SET b = 'y', c = c + 1 WHERE a = 1",
    "DELETE FROM t WHERE d < '2026-01-01'",
    "ALTER TABLE t ADD COLUMN h INT",
    "ALTER TABLE t DROP COLUMN h",
    "ALTER TABLE t DROP PARTITION LIST '2026'",
    "ALTER TABLE t DROP PARTITION WHERE d < '2026-01-01'",
    "BEGIN; COMMIT; ROLLBACK; CHECKPOINT; TRUNCATE TABLE t; DROP TABLE IF EXISTS t",
    "SHOW TABLES; SHOW COLUMNS FROM t; SHOW CREATE TABLE t; SHOW USERS; SHOW GRANTS FOR u",
    "CREATE DATABASE IF NOT EXISTS d; DROP DATABASE IF EXISTS d;"
    " ALTER DATABASE d SET WAL_ARCHIVE = '1GB'",
    "CREATE USER u; CREATE TOKEN FOR u EXPIRES IN '1d'; GRANT READ ON DATABASE d TO u;"
    " GRANT SELECT ON t TO PUBLIC; REVOKE SELECT ON t FROM u; DROP TOKEN FOR u; DROP USER u",
)


def warm_up() -> None:
    """Parse one statement of each kind, so that the lexer builds its per-state scanners now.

    lark builds them lazily, which would make the first requests of a new server slow.
    """
    for text in _WARM_UP:
        parse(text)

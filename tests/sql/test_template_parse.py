"""A templated text is the statement a fresh parse of it makes: its template's parse with
its constants put back in for the `?`s is that statement, and a text the parser refuses is
never templated."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import KdbError
from refimpl.sql import ast
from refimpl.sql.parser import parse
from refimpl.sql.templates import templated

# Statements whose `{}`s are filled with constants, and with what the scan must tell apart
# from them: constants touching letters, digits, points, signs or quotes, names, non-ASCII
# digits (which the parser refuses), and where a number is a column's position (ORDER BY).
_STATEMENTS = st.sampled_from(
    [
        "SELECT * FROM t WHERE id = {} AND s = {}",
        "SELECT x FROM t WHERE x > {} ORDER BY {}",
        "INSERT INTO t VALUES ({}, {}, {})",
        "UPDATE t SET x = {} WHERE id = {}",
        "DELETE FROM t WHERE x < {} OR s = {}",
        "SELECT id, {} FROM t WHERE x = {} GROUP BY id HAVING x > {}",
        "SELECT * FROM t WHERE s IN ({}, {}) LIMIT {}",
    ]
)
# Constants whose values the parser takes (finite, short), so that a refusal is the text's.
_CONSTANTS = st.one_of(
    st.sampled_from(["5", "007", "1.", ".5", "1.5", "1e5", "1E-3", "''", "'x''y'", "'5'"]),
    st.integers(0, 2**70).map(str),
    st.floats(min_value=0, max_value=1e300, allow_nan=False).map(repr),
    st.text(st.characters(min_codepoint=32, max_codepoint=0x700), max_size=6).map(
        lambda text: "'" + text.replace("'", "''") + "'"
    ),
)
_ODD = st.one_of(
    st.sampled_from(["-", "- ", "x", "t1", ".", "e", "'", "\u0661\u0662", "\u0663", "\u00b2"]),
    st.text(st.sampled_from(list("'\"-/*;?.5eE_x ()é\u0663")), min_size=1, max_size=3),
)
_FILLS = st.one_of(
    _CONSTANTS,
    st.tuples(_ODD, _CONSTANTS).map("".join),
    st.tuples(_CONSTANTS, _ODD).map("".join),
    _ODD,
)
_TYPES = {int: "INT", float: "DOUBLE", str: "STRING"}


def bound(node: Any, values: tuple[Any, ...]) -> Any:
    """`node` with each `?` made the literal of its value, a minus before a number folded
    into it (as the parser folds `-5`)."""
    if isinstance(node, ast.Param):
        value = values[node.index]
        return ast.Literal(value, _TYPES[type(value)])
    if isinstance(node, tuple):
        return tuple(bound(item, values) for item in node)
    if not dataclasses.is_dataclass(node) or isinstance(node, type):
        return node
    changed = {
        field.name: bound(getattr(node, field.name), values)
        for field in dataclasses.fields(node)
        if field.init
    }
    node = dataclasses.replace(node, **changed)
    if (
        isinstance(node, ast.Unary)
        and node.op == "-"
        and isinstance(node.operand, ast.Literal)
        and node.operand.type in ("INT", "DOUBLE")
    ):
        return ast.Literal(-node.operand.value, node.operand.type)  # type: ignore[operator]
    return node


@settings(max_examples=1500, deadline=None)
@given(statement=_STATEMENTS, fills=st.lists(_FILLS, min_size=3, max_size=3))
def test_a_templated_text_is_its_fresh_parse(statement, fills):
    text = statement.format(*fills)
    shared = templated(text)
    try:
        fresh = parse(text)
    except KdbError:
        assert shared is None, text  # refused as written: never run from a template
        return
    if shared is not None:
        assert shared.script.sources == (text.strip(),)
        assert bound(shared.script.statements, shared.params) == fresh.statements, text


def test_a_non_ascii_digit_is_no_constant():
    """The parser reads ASCII digits alone as a number: a text with another digit where a
    constant would be is refused as written, not run with that digit's value."""
    for text in ("SELECT * FROM t WHERE id = \u0661\u0662", "INSERT INTO t VALUES (\u0663)"):
        assert templated(text) is None


def test_a_double_too_large_is_no_constant():
    """A number past a DOUBLE's range is refused by the parser: such a text is parsed as
    written (and refused), never run with an infinity for the number."""
    for text in (
        "SELECT * FROM t WHERE id = 5 AND s = 1e+315",
        "INSERT INTO t VALUES (1, 1e400, 'x')",
        "SELECT * FROM t WHERE s = 1e400 ORDER BY 1",  # the scan's path, not the shape's
        'SELECT * FROM t WHERE "s" = 2.5e308',
    ):
        assert templated(text) is None, text
    assert templated("INSERT INTO t VALUES (1, 1e300, 'x')") is not None

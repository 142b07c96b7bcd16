"""Statements that differ only in their constants share one parse.

Clients of /exec send `INSERT INTO t VALUES (1, 'a')`, then `(2, 'b')`, and point SELECTs
with a new key each time: text the parse cache never saw. `templated(text)` replaces the
constants where a `?` means exactly the same thing (the values of an INSERT ... VALUES, and
the WHERE clause of SELECT, UPDATE and DELETE up to an ORDER BY, GROUP BY or HAVING, where a
number could be a column position) by `?`, parses that template once, and returns the
constants as parameters. Anything else, or a template that does not parse, is parsed as
written, so errors keep their positions. A short text's shape (its constants each made a `?`)
is found in one call, and whether that shape is its template is remembered by shape.
"""

from __future__ import annotations

import functools
import re
from typing import Any, NamedTuple

from refimpl.errors import StatementTimeout, StatementTooLarge
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

# A constant as the scan below takes it, read as the parser reads it (ASCII: its NUMBER
# takes no other digits, nor its names other letters). A number is not part of a word (`t1`)
# or of another number; a string is the quotes and what they hold, a doubled quote included.
_NUMBER = r"(?<![\w.])(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?(?![\w.])"
_STRING = r"'[^']*(?:''[^']*)*'"
_TOKEN = re.compile(
    # A run of plain characters is one step of the matcher, not one per character: a
    # 1 MB literal took 0.3 s of the interpreter lock (every request waited), now 1 ms.
    # The look-ahead first, a class of every character a token may begin with, turns each
    # position where none begins (spaces, operators) down in one step instead of a try of
    # each kind; the kinds begin with different characters, so their order does not change
    # what matches, and the most common come first.
    r"""(?=[A-Za-z_0-9.'"/;?-])(?:"""
    r"""(?P<word>[A-Za-z_][A-Za-z0-9_]*)"""
    rf"""|(?P<number>{_NUMBER})"""
    rf"""|(?P<string>{_STRING})"""
    r"""|(?P<quoted>"[^"]*(?:""[^"]*)*")"""
    r"""|(?P<comment>--|/\*)"""
    r"""|(?P<other>[;?]))""",
    re.ASCII,
)
# The constants alone, found in one call (`re.split`) where no `'` can be part of anything
# but a string: in a text without quoted names or comments (`_shaped`). Words need no match
# of their own here: a string cannot begin inside one, and a number's look-behind keeps the
# digits of `t1` out, so the same constants are found as by `_TOKEN`. The pattern begins
# with the class of a constant's first character, so that the matcher skips in one C loop
# to where one may begin (a look-around first would have it try the whole pattern at every
# position: most of the scan's cost); the look-behinds after that character are
# `_NUMBER`'s, of a number that begins one character back. Its one group is the constant.
_CONSTANT = re.compile(
    r"([0-9.'](?:(?<=')[^']*+(?:''[^']*+)*'"
    r"|(?<![\w.].)(?:(?<=\.)[0-9]++|(?<=[0-9])[0-9]*+(?:\.[0-9]*+)?+)"
    r"(?:[eE][+-]?[0-9]++)?+(?![\w.])))",
    re.ASCII,
)
# Texts up to this many characters are templated by their shape (`_shape_verdict`,
# which keeps at most 4096 shapes: a few megabytes).
SHAPED_TEXT = 1024
# What float() makes of a number too large for a DOUBLE, which the parser refuses.
_INFINITY = float("inf")
# int() refuses more digits than this (Python's guard against its quadratic conversion).
_LONGEST_INTEGER = 4300
assert SHAPED_TEXT < _LONGEST_INTEGER
_STOP_WORDS = frozenset({"ORDER", "GROUP", "HAVING"})
_START_WORDS = {"INSERT": "VALUES", "SELECT": "WHERE", "UPDATE": "WHERE", "DELETE": "WHERE"}


# Named tuples: made in a step, where a frozen dataclass sets each field by a call; every
# templated statement makes one of each.
class Templated(NamedTuple):
    script: ast.ParsedScript
    params: tuple[Any, ...]


class Template(NamedTuple):
    """A text's constants found: `text` with a `?` for each, and their values in order."""

    text: str
    values: tuple[Any, ...]


# `Template(text, values)` of a `(text, values)` pair, in C: a named tuple's `__new__` is a
# Python function, a frame more at every templated request.
_template = functools.partial(tuple.__new__, Template)


def templated(text: str, deadline: float | None = None) -> Templated | None:
    """The shared parse of `text` and its constants, or None when it is not templatable.

    `deadline` is the parse's (see `parse_cached`); a parse past it raises StatementTimeout.
    """
    template = template_of(text)
    if template is None:
        return None
    shared = shared_parse(template, deadline)
    if shared is None:
        return None
    return Templated(
        ast.ParsedScript(shared.statements, shared.param_count, (text.strip(),)), template.values
    )


def shared_parse(template: Template, deadline: float | None = None) -> ast.ParsedScript | None:
    """The parse every text of `template` shares (its constants `?`), or None when it is not
    one statement taking all of them: the text as written is then parsed instead. Its one
    statement's source is the template's: a caller names the text as written instead."""
    try:
        shared = parse_cached(template.text, deadline)
    except (StatementTimeout, StatementTooLarge):
        raise  # the text as written would only meet the same limit again, at the same cost
    except Exception:  # noqa: BLE001 - the text as written gets the real error and position
        return None
    if len(shared.statements) != 1 or shared.param_count != len(template.values):
        return None
    return shared


@functools.lru_cache(maxsize=4096)
def _unquote(literal: str) -> str:
    return literal[1:-1].replace("''", "'")


def template_of(text: str) -> Template | None:
    """The template of `text` and its constants; None when the text is not templatable
    (several statements, comments, ? of the caller's own)."""
    if len(text) > SHAPED_TEXT or not _shaped(text):
        return _scanned(text)
    # [text before the first constant, the constant, text before the next, ...]
    pieces = _CONSTANT.split(text)
    shape = "?".join(pieces[::2])
    verdict = _shape_verdict(shape)
    if verdict is None:
        return _scanned(text)  # a constant kept as written (ORDER BY 2)
    if not verdict:
        return None
    # A constant of ASCII digits alone is an integer (within int()'s limit of digits: the
    # text is short), one beginning with a quote a string, any other a number with a point
    # or an exponent.
    values = [
        int(constant)
        if constant.isdigit()
        else (float(constant) if constant[0] != "'" else constant[1:-1].replace("''", "'"))
        for constant in pieces[1::2]
    ]
    if _INFINITY in values:
        return None  # a number too large for a DOUBLE: the parse as written refuses it
    return _template((shape, tuple(values)))


def _shaped(text: str) -> bool:
    """Whether `text` has no quoted name, comment, `?` or `;`: a `'` in it begins or ends a
    string, and its shape decides its template (`_shape_verdict`). Five searches in
    C, each far cheaper than a regular expression's try at every position."""
    return not ('"' in text or "?" in text or ";" in text or "--" in text or "/*" in text)


@functools.lru_cache(maxsize=4096)
def _shape_verdict(shape: str) -> bool | None:
    """What the scan of a text (`_scanned`) whose constants, each made a `?`, give `shape`
    makes of it: True when every constant becomes a parameter (its template is `shape`),
    False when it gives no template at all (no WHERE, a comment, a SELECT without FROM),
    None when it takes some constants only, which only the text's own scan tells apart.
    Clients send one shape again and again with other values (an INSERT's row, a point
    SELECT's key, a health check's `SELECT 1`), and the scan decides by the words between
    the constants alone (a value refused as written, too large, only makes it None), so the
    answer holds for every text of the shape: it is asked once, of the shape with a ` 0 `
    for each constant (spaces around it, so that it is a number wherever the constant stood
    and touches nothing the constant did not)."""
    template = _scanned(shape.replace("?", " 0 "))
    if template is None:
        return False
    return True if len(template.values) == shape.count("?") else None


def _scanned(text: str) -> Template | None:
    """`template_of(text)` by one pass over its tokens."""
    parts: list[str] = []
    values: list[Any] = []
    position = 0
    start_word: str | None = None  # after it, constants become parameters
    active = found = False
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        if kind == "word":
            upper = match.group().upper()
            if start_word is None:
                start_word = _START_WORDS.get(upper)
                if start_word is None:
                    return None
            elif upper == start_word:
                active = found = True
            elif upper in _STOP_WORDS:
                active = False
            elif upper == "SELECT" and start_word == "VALUES":
                return None  # INSERT ... SELECT: as written
            continue
        if kind == "comment" or kind == "other":
            return None
        if not active or (kind != "string" and kind != "number"):
            continue
        literal = match.group()
        if kind == "string":
            values.append(_unquote(literal))
        elif "." in literal or "e" in literal or "E" in literal:
            number = float(literal)
            if number == _INFINITY:
                return None  # too large for a DOUBLE: the parse as written refuses it
            values.append(number)
        elif len(literal) > _LONGEST_INTEGER:
            return None  # the parse as written says the number has too many digits
        else:
            values.append(int(literal))
        parts.append(text[position : match.start()])
        parts.append("?")
        position = match.end()
    if not found:
        return None
    if not values:
        return Template(text, ())
    parts.append(text[position:])
    return Template("".join(parts), tuple(values))

"""Arrays: `x op ANY/ALL (array)`, `a[i]`, `ARRAY[...]`, over PostgreSQL's text of an array
(`{1,2}`).

An array's value is that text. Most arrays here have the type STRING (`ARRAY(SELECT ...)`,
`ARRAY[...]`: see `refimpl.engine.query.subqueries`), read back element by element as the
other operand's type. Some know their elements' type, which a client then sees: `T[]` (what
`array_agg` of a T answers), and the catalog's vectors `INT2VECTOR` (`pg_index.indkey`, of
INT) and `OIDVECTOR` (of OID), written `4 5`, whose subscripts start at 0 as in
PostgreSQL. `a[i]` reads the element at `i`: from 1 in an array's text, from 0 in a vector's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refimpl.engine.query.compiled import COMPARE, Compiled, Scope
from refimpl.engine.storage.values import parse_text, to_text
from refimpl.errors import InvalidValue, TypeMismatch, UnknownColumn
from refimpl.sql import ast

Compile = Callable[[ast.Expr, Scope], Compiled]


# The vector types' elements (PostgreSQL's int2vector and oidvector).
VECTORS = {"INT2VECTOR": "INT", "OIDVECTOR": "OID"}


def element_type(type_: str) -> str | None:
    """The elements' type of an array of type `type_` (STRING: elements as text); None
    when `type_` is no array."""
    if type_.endswith("[]"):
        return type_[:-2]
    if type_ == "STRING":
        return "STRING"
    return VECTORS.get(type_)


def elements(text: str, element: str) -> tuple[list[Any], int]:
    """The elements of an array's text as values of `element`, and the first subscript."""
    items, first = subscripted_items(text)
    if element in ("STRING", "SYMBOL"):
        return items, first
    return [None if i is None else parse_text(i, element, "an array element") for i in items], first


def array_items(text: str) -> list[str | None]:
    """The elements of `{a,"b c",NULL}` (one level; quotes and backslashes read)."""
    body = text.strip()
    if len(body) < 2 or body[0] != "{" or body[-1] != "}":
        raise InvalidValue(f"{text!r} is not an array; write it as '{{a,b}}'")
    items: list[str | None] = []
    current: list[str] = []
    quoted = escaped = was_quoted = False
    for ch in body[1:-1]:
        if escaped:
            current.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            quoted, was_quoted = not quoted, True
        elif ch == "," and not quoted:
            items.append(_item(current, was_quoted))
            current, was_quoted = [], False
        else:
            current.append(ch)
    if current or was_quoted or items:
        items.append(_item(current, was_quoted))
    return items


def _item(chars: list[str], was_quoted: bool) -> str | None:
    text = "".join(chars) if was_quoted else "".join(chars).strip()
    return None if not was_quoted and text.upper() == "NULL" else text


def _array_quantified(expr: ast.ArrayQuantified, scope: Scope, compile_: Compile) -> Compiled:
    operand = compile_(expr.operand, scope)
    array = compile_(expr.array, scope)
    if array.type != "NULL" and element_type(array.type) is None:
        raise TypeMismatch(f"{expr.quantifier} needs an array, not {array.type}")
    compare = COMPARE[expr.op]
    want_any = expr.quantifier == "ANY"

    def evaluate(row: Sequence[Any]) -> Any:
        value, text = operand.fn(row), array.fn(row)
        if value is None or text is None:
            return None
        unknown = False
        for item in array_items(text):
            if item is None:
                unknown = True
                continue
            element = (
                parse_text(item, operand.type, "an array element")
                if operand.type not in ("STRING", "SYMBOL")
                else item
            )
            if compare(value, element) == want_any:
                return want_any
        return None if unknown else not want_any

    return Compiled(evaluate, "BOOLEAN")


def _subscript(expr: ast.Subscript, scope: Scope, compile_: Compile) -> Compiled:
    array = compile_(expr.array, scope)
    index = compile_(expr.index, scope)
    if array.type != "NULL" and element_type(array.type) is None:
        raise TypeMismatch(f"a subscript needs an array, not {array.type}")
    if index.type not in ("INT", "BIGINT", "NULL"):
        raise TypeMismatch(f"an array subscript must be an integer, not {index.type}")
    # An array of STRING type whose elements' type is unknown is read as integers: the
    # arrays psql's catalog queries subscript are all of them (int2vector, oidvector, int2[]).
    element = "BIGINT" if array.type in ("STRING", "NULL") else element_type(array.type)
    assert element is not None

    def evaluate(row: Sequence[Any]) -> Any:
        text, at = array.fn(row), index.fn(row)
        if text is None or at is None:
            return None
        items, first = subscripted_items(text)
        item = items[at - first] if first <= at < first + len(items) else None
        return None if item is None else parse_text(item, element, "an array element")

    return Compiled(evaluate, element)


def subscripted_items(text: str) -> tuple[list[str | None], int]:
    """The elements of an array's text and the subscript of the first: `{4,5}` from 1;
    `4 5` (a vector's text: numbers between spaces) from 0."""
    if text.lstrip().startswith("{"):
        return array_items(text), 1
    words: list[str | None] = list(text.split())
    return words, 0


def array_upper(text: str | None, dimension: int | None) -> int | None:
    """PostgreSQL's `array_upper(a, 1)`: the last subscript of a one-level array's text
    (NULL for an empty array, a NULL one, or another dimension)."""
    if text is None or dimension != 1:
        return None
    return len(array_items(text)) or None


def record_type(fields: Sequence[tuple[str, str]]) -> str:
    """The type of a record of these (name, type) fields: `RECORD(x INT, n INT)`; its value
    is a tuple of theirs."""
    return "RECORD(" + ", ".join(f"{name} {type_}" for name, type_ in fields) + ")"


def _field_select(expr: ast.FieldSelect, scope: Scope, compile_: Compile) -> Compiled:
    """`(record).field` of a record (`_pg_expandarray`'s `(x, n)`)."""
    record = compile_(expr.operand, scope)
    if not record.type.startswith("RECORD("):
        raise TypeMismatch(f"(...).{expr.field} needs a record, not {record.type}")
    fields = [item.split(" ") for item in record.type[len("RECORD(") : -1].split(", ")]
    at = next((i for i, (name, _) in enumerate(fields) if name == expr.field), None)
    if at is None:
        shown = ", ".join(name for name, _ in fields)
        raise UnknownColumn(f"{expr.field} (the record has {shown})")
    fn = record.fn
    return Compiled(lambda row: None if (value := fn(row)) is None else value[at], fields[at][1])


def array_handlers(compile_: Compile) -> dict[type, Callable[[Any, Scope], Compiled]]:
    return {
        ast.FieldSelect: lambda expr, scope: _field_select(expr, scope, compile_),
        ast.ArrayQuantified: lambda expr, scope: _array_quantified(expr, scope, compile_),
        ast.Subscript: lambda expr, scope: _subscript(expr, scope, compile_),
        ast.ArrayValue: lambda expr, scope: _array_value(expr, scope, compile_),
    }


def _array_value(expr: ast.ArrayValue, scope: Scope, compile_: Compile) -> Compiled:
    """`ARRAY[a, b]`: PostgreSQL's text of the array, each value written as its type's text
    (this engine has no array type; see the module doc)."""
    items = [compile_(item, scope) for item in expr.items]

    def evaluate(row: Sequence[Any]) -> str:
        return array_text([(item.fn(row), item.type) for item in items])

    return Compiled(evaluate, "STRING")


def array_text(values: Sequence[tuple[Any, str]]) -> str:
    """PostgreSQL's text of an array of (value, column type) pairs: `{a,"b c",NULL}`."""
    out = []
    for value, type_ in values:
        if value is None:
            out.append("NULL")
            continue
        text = to_text(value, type_)
        if not text or any(ch in text for ch in '{}," \\') or text.upper() == "NULL":
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        out.append(text)
    return "{" + ",".join(out) + "}"

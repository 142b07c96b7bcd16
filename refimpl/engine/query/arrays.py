"""Arrays: `x op ANY/ALL (array)`, `a[i]`, `ARRAY[...]`, `x::t[]`, over PostgreSQL's text of
an array (`{1,2}`).

An array's value is that text. Most arrays know their elements' type, which a client then
sees: `T[]`, what `array_agg` of a T answers, `ARRAY[...]` and `ARRAY(SELECT ...)` of T values
(see `refimpl.engine.query.subqueries`) and a cast `x::int4[]` (`array_of`, `array_cast`);
and the catalog's vectors `INT2VECTOR` (`pg_index.indkey`, of INT) and `OIDVECTOR` (of OID),
written `4 5`, whose subscripts start at 0 as in PostgreSQL. An array of values of no common
type, or a text constant used as an array (`'{1,2}'`), has the type STRING, read back element
by element as the other operand's type. `a[i]` reads the element at `i`: from 1 in an
array's text, from 0 in a vector's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from refimpl.engine.query.compiled import COMPARE, Compiled, Scope, common_type
from refimpl.engine.storage.values import parse_text, to_text
from refimpl.errors import InvalidValue, TypeMismatch, UnknownColumn
from refimpl.sql import ast

Compile = Callable[[ast.Expr, Scope], Compiled]


# The vector types' elements (PostgreSQL's int2vector and oidvector).
VECTORS = {"INT2VECTOR": "INT", "OIDVECTOR": "OID"}
# The element types of typed arrays `T[]` (SYMBOL's arrays are STRING[], both text[]).
_ELEMENTS = frozenset({"INT", "BIGINT", "DOUBLE", "STRING", "BOOLEAN", "TIMESTAMP", "OID"})
# PostgreSQL's element names in an array cast (`x::int4[]`) -> the element type.
ARRAY_ELEMENT_TYPES = {
    "oid": "OID",
    "int": "INT", "int4": "INT", "integer": "INT", "int2": "INT", "smallint": "INT",
    "int8": "BIGINT", "bigint": "BIGINT",
    "text": "STRING", "varchar": "STRING", "name": "STRING",
    "float8": "DOUBLE", "float4": "DOUBLE", "numeric": "DOUBLE",
    "bool": "BOOLEAN", "boolean": "BOOLEAN",
    "timestamptz": "TIMESTAMP", "timestamp": "TIMESTAMP",
}  # fmt: skip


def array_of(types: Sequence[str]) -> str:
    """The type of an array of values of `types`, as PostgreSQL types `ARRAY[...]`: `T[]` of
    their common type (`STRING[]`, PostgreSQL's text[], for NULLs alone); STRING, an array of
    untyped elements, for no values or values of no common type (`ARRAY[1, 'a']`)."""
    if not types:
        return "STRING"
    try:
        common = common_type(list(types), "ARRAY[...]")
    except TypeMismatch:
        return "STRING"
    common = {"NULL": "STRING", "SYMBOL": "STRING"}.get(common, common)
    return f"{common}[]" if common in _ELEMENTS else "STRING"


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
    return _read(items, element), first


def elements_of(text: str, type_: str, element: str) -> list[Any]:
    """The elements of an array of type `type_` as values of `element`: a vector's words, or
    an array's text in braces (InvalidValue for text that is no array, `'a b'`)."""
    return _read(subscripted_items(text)[0] if type_ in VECTORS else array_items(text), element)


def _read(items: list[str | None], element: str) -> list[Any]:
    if element in ("STRING", "SYMBOL"):
        return items
    return [None if i is None else parse_text(i, element, "an array element") for i in items]


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
    """`ARRAY[a, b]`: PostgreSQL's text of the array, each value written as its type's text,
    of the type `array_of` the values' types."""
    items = [compile_(item, scope) for item in expr.items]

    def evaluate(row: Sequence[Any]) -> str:
        return array_text([(item.fn(row), item.type) for item in items])

    return Compiled(evaluate, array_of([item.type for item in items]))


def array_cast(operand: Compiled, element_name: str) -> Compiled:
    """`x::t[]`: the array `x` (an array's or a vector's text, typed or not) as an array of
    the type PostgreSQL's element name `t` stands for, each element read as that type
    (InvalidValue for one that is none) and written again; for an element type of no
    column's (`regtype[]`), the text as it is, of type STRING."""
    element = ARRAY_ELEMENT_TYPES.get(element_name.lower())
    fn = operand.fn
    if element is None:
        source = operand.type
        return Compiled(
            lambda row: None if (v := fn(row)) is None else to_text(v, source),
            "STRING",
            operand.constant,
        )
    source = operand.type
    if source != "NULL" and element_type(source) is None:
        raise TypeMismatch(f"cannot cast {source} to {element_name}[]: it is no array")

    def convert(row: Sequence[Any]) -> str | None:
        text = fn(row)
        if text is None:
            return None
        return array_text([(value, element) for value in elements_of(text, source, element)])

    return Compiled(convert, f"{element}[]", operand.constant)


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

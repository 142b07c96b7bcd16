"""Expression objects of PostgreSQL's arrays (part of `refimpl.sql.ast`, which re-exports
every name here: use them as `ast.Subscript`), and casts, which may be to an array. This
engine has no array type: an array is its text, `{1,2}`."""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.sql.ast_base import Expr


@dataclass(frozen=True, slots=True)
class Subscript(Expr):
    """`array[index]`: the element at `index` (from 1) of an integer array's text, `{1,2}`
    (psql's catalog queries read one); NULL past either end."""

    array: Expr
    index: Expr


@dataclass(frozen=True, slots=True)
class ArrayValue(Expr):
    """`ARRAY[a, b, ...]`: the text of an array of the values (`{1,2}`)."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """`CAST(operand AS type)`. `element` is the PostgreSQL element type's name of an array
    cast (`$1::oid[]`: type STRING, element `oid`): the engine reads the array as its text,
    and a client is told the parameter's array type."""

    operand: Expr
    type: str
    element: str | None = None

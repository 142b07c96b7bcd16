"""The base of the expression objects (part of `refimpl.sql.ast`, which re-exports it: use it
as `ast.Expr`), apart so that the modules of `ast`'s node families can derive from it."""

from __future__ import annotations


class Expr:
    """Base of every expression node."""

    __slots__ = ()

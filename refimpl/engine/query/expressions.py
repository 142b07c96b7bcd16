"""Expressions compiled to Python closures over a row tuple.

`compile_expression(expr, scope)` checks names and types once and returns a `Compiled`:
a function from a row to a value, and the SQL type of that value. NULL propagates as in
SQL: arithmetic and comparisons with NULL give NULL, AND/OR use three-valued logic, and a
WHERE keeps a row only when its condition is TRUE.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from refimpl.engine.query import deadlines, regex
from refimpl.engine.query.arrays import array_cast, array_handlers
from refimpl.engine.query.compiled import (
    COMPARE,
    Compiled,
    Evaluator,
    Scope,
    common_type,
    comparable,
    is_numeric,
    numeric_result,
    refuse_blob,
    require_boolean,
    timestamps_of_text,
)
from refimpl.engine.query.functions import FUNCTIONS, cast_value, range_checked
from refimpl.engine.query.like import like_matcher
from refimpl.engine.query.subqueries import subquery_handlers
from refimpl.engine.storage import values
from refimpl.errors import (
    ParameterError,
    SqlError,
    TypeMismatch,
    UnknownFunction,
)
from refimpl.sql import ast

# A `||` whose texts are this long together (a copy of tens of microseconds) first asks
# the statement's deadline: cheap beside the copy, and never asked for short texts.
CONCAT_CHECK_CHARS = 64 * 1024
AGGREGATES = frozenset(
    {
        "count",
        "sum",
        "total",
        "avg",
        "min",
        "max",
        "first",
        "last",
        "group_concat",
        "string_agg",
        "array_agg",
        "bool_and",
        "bool_or",
    }
)


def compile_expression(expr: ast.Expr, scope: Scope) -> Compiled:
    """Compile `expr`; raises SqlError subclasses naming what is wrong."""
    slot = scope.slots.get(expr) if scope.slots else None
    if slot is not None:
        index, type_ = slot
        return Compiled(lambda row: row[index], type_)
    handler = _HANDLERS.get(type(expr))
    if handler is None:
        raise SqlError(f"{type(expr).__name__} is not allowed in {scope.clause}")
    return handler(expr, scope)


def constant_value(expr: ast.Expr, scope: Scope) -> Any:
    """The value of an expression that reads no row (a LIMIT, a VALUES item)."""
    compiled = compile_expression(expr, scope)
    return compiled.fn(())


# -- leaves ------------------------------------------------------------------------------


def _literal(expr: ast.Literal, scope: Scope) -> Compiled:
    value = expr.value
    type_ = expr.type
    if type_ == "INT" and not values.INT_MIN <= value <= values.INT_MAX:  # type: ignore[operator]
        type_ = "BIGINT"
        values.in_range(value, type_, "the number")
    return Compiled(lambda row: value, type_, constant=True)


def _param(expr: ast.Param, scope: Scope) -> Compiled:
    if expr.index >= len(scope.params):
        raise ParameterError(
            f"the statement has more ? placeholders than the {len(scope.params)} parameter(s) given"
        )
    value = scope.params[expr.index]
    type_ = values.type_of_value(value)
    if type_ == "TIMESTAMP":
        value = values.coerce(value, "TIMESTAMP", "?")
    values.in_range(value, "BIGINT" if type_ == "INT" else type_, f"parameter {expr.index + 1}")
    return Compiled(lambda row: value, type_, constant=True)


def _column(expr: ast.ColumnRef, scope: Scope) -> Compiled:
    return scope.reader(expr)


def _star(expr: ast.Star, scope: Scope) -> Compiled:
    raise SqlError(f"* is not allowed in {scope.clause}")


# -- operators ---------------------------------------------------------------------------


def _int_div(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b >= 0) else -quotient


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return _int_div(a, b)
    return a / b


def _modulo(a: Any, b: Any) -> Any:
    if b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        return a - b * _int_div(a, b)
    return math.fmod(a, b)


_ARITHMETIC: dict[str, Callable[[Any, Any], Any]] = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": _divide,
    "%": _modulo,
}

_WORD = 1 << 64


def _as_int64(value: int) -> int:
    """The low 64 bits of `value` as a signed integer: a bit operation's result wraps."""
    value &= _WORD - 1
    return value - _WORD if value >> 63 else value


def _shift_left(value: int, count: int) -> int:
    # SQLite's rules: a negative count shifts the other way; 64 or more places leave no bit
    # (0, or -1 for a negative value shifted right).
    if count < 0:
        return _shift_right(value, -count)
    return 0 if count >= 64 else _as_int64(value << count)


def _shift_right(value: int, count: int) -> int:
    if count < 0:
        return _shift_left(value, -count)
    return value >> min(count, 63)


_BITWISE: dict[str, Callable[[int, int], int]] = {
    "<<": _shift_left,
    ">>": _shift_right,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
}


def _null_strict(lf: Evaluator, rf: Evaluator, operation: Callable[[Any, Any], Any]) -> Evaluator:
    """`operation` of both sides; NULL when either is NULL (the right side is then not read)."""

    def apply(row: Sequence[Any]) -> Any:
        a = lf(row)
        if a is None:
            return None
        b = rf(row)
        if b is None:
            return None
        return operation(a, b)

    return apply


def _binary(expr: ast.Binary, scope: Scope) -> Compiled:
    op = expr.op
    left = compile_expression(expr.left, scope)
    right = compile_expression(expr.right, scope)
    lf, rf = left.fn, right.fn
    constant = left.constant and right.constant
    if op in ("AND", "OR"):
        require_boolean(left, op)
        require_boolean(right, op)
        decisive = op == "OR"  # the value that decides alone: TRUE for OR, FALSE for AND

        def logical(row: Sequence[Any]) -> Any:
            a = lf(row)
            if a is decisive:
                return decisive
            b = rf(row)
            if b is decisive:
                return decisive
            if a is None or b is None:
                return None  # three-valued logic: unknown unless one side decides
            return not decisive

        return Compiled(logical, "BOOLEAN", constant)
    if op in COMPARE:
        left, right = comparable(left, right, f"'{op}'", equality=op in ("=", "<>"))
        lf, rf = left.fn, right.fn
        return Compiled(_null_strict(lf, rf, COMPARE[op]), "BOOLEAN", constant)
    if op in regex.OPERATORS:
        if isinstance(expr.right, (ast.Literal, ast.Param)):
            regex.check_pattern(op, rf(()))
        return Compiled(_null_strict(lf, rf, regex.matcher(op)), "BOOLEAN", constant)
    if op in _BITWISE:
        for side in (left, right):
            if side.type not in (*values.INTEGER_TYPES, "NULL"):
                raise TypeMismatch(
                    f"operator '{op}' works on integers (INT, BIGINT), not {side.type}"
                )
        return Compiled(_null_strict(lf, rf, _BITWISE[op]), "BIGINT", constant)
    if op == "||":
        refuse_blob(left.type, "'||'")
        refuse_blob(right.type, "'||'")

        def concat(row: Sequence[Any]) -> Any:
            a = lf(row)
            b = rf(row)
            if a is None or b is None:
                return None
            a, b = values.to_text(a, left.type), values.to_text(b, right.type)
            if len(a) + len(b) >= CONCAT_CHECK_CHARS:
                # Nested `||` over long texts copies ever longer texts: seconds in one row,
                # where the scans' checks between rows never come.
                deadlines.check()
            return a + b

        return Compiled(concat, "STRING", constant)
    if op in _ARITHMETIC:
        result_type = _arithmetic_type(op, left.type, right.type)
        # Every result is kept within its type's range: an overflow is an error, never a
        # wrapped value nor an integer that grows without bound.
        operation = range_checked(_ARITHMETIC[op], result_type, f"operator '{op}'")
        return Compiled(_null_strict(lf, rf, operation), result_type, constant)
    raise SqlError(f"unknown operator {op}")


def _arithmetic_type(op: str, left: str, right: str) -> str:
    if is_numeric(left) and is_numeric(right):
        return numeric_result(left, right)
    if op == "-" and left == "TIMESTAMP" and right == "TIMESTAMP":
        return "BIGINT"
    if op in "+-" and left == "TIMESTAMP" and right in values.INTEGER_TYPES:
        return "TIMESTAMP"
    raise TypeMismatch(f"operator '{op}' cannot combine {left} and {right}")


def _unary(expr: ast.Unary, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    fn = operand.fn
    if expr.op == "NOT":
        require_boolean(operand, "NOT")
        return Compiled(
            lambda row: None if (v := fn(row)) is None else not v, "BOOLEAN", operand.constant
        )
    if not is_numeric(operand.type):
        raise TypeMismatch(f"unary '{expr.op}' needs a number, not {operand.type}")
    if expr.op == "-":
        type_ = "BIGINT" if operand.type == "OID" else operand.type  # an OID computes so
        negate = range_checked(lambda v: -v, type_, "unary '-'")
        return Compiled(
            lambda row: None if (v := fn(row)) is None else negate(v), type_, operand.constant
        )
    return operand


def _is_null(expr: ast.IsNull, scope: Scope) -> Compiled:
    fn = compile_expression(expr.operand, scope).fn
    if expr.negated:
        return Compiled(lambda row: fn(row) is not None, "BOOLEAN")
    return Compiled(lambda row: fn(row) is None, "BOOLEAN")


def _in_list(expr: ast.InList, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    items = [
        comparable(operand, compile_expression(i, scope), "IN", equality=True)[1]
        for i in expr.items
    ]
    fn, negated = operand.fn, expr.negated
    if not items:
        # Nothing is in an empty list, not even NULL (as SQLite answers; spec "IN").
        return Compiled(lambda row: negated, "BOOLEAN", operand.constant)
    if all(item.constant for item in items):
        members = [item.fn(()) for item in items]
        has_null = any(m is None for m in members)
        found_set = frozenset(m for m in members if m is not None)

        def member_of(row: Sequence[Any]) -> Any:
            value = fn(row)
            if value is None:
                return None
            if value in found_set:
                return not negated
            return None if has_null else negated

        return Compiled(member_of, "BOOLEAN")
    item_fns = [item.fn for item in items]

    def member_of_any(row: Sequence[Any]) -> Any:
        value = fn(row)
        if value is None:
            return None
        saw_null = False
        for item_fn in item_fns:
            candidate = item_fn(row)
            if candidate is None:
                saw_null = True
            elif candidate == value:
                return not negated
        return None if saw_null else negated

    return Compiled(member_of_any, "BOOLEAN")


def _between(expr: ast.Between, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    # Two comparisons, each with its own affinity: a text constant operand may read as a
    # number next to one bound and stay text next to the other.
    low_side, low = comparable(operand, compile_expression(expr.low, scope), "BETWEEN")
    high_side, high = comparable(operand, compile_expression(expr.high, scope), "BETWEEN")
    fn, lfn, hfn, negated = low_side.fn, low.fn, high.fn, expr.negated
    high_fn = None if high_side.fn is fn else high_side.fn

    def between(row: Sequence[Any]) -> Any:
        # `low <= x AND x <= high` in three-valued logic: one known FALSE side decides, even
        # when the other bound is NULL.
        value = fn(row)
        if value is None:
            return None
        lo, hi = lfn(row), hfn(row)
        above = None if lo is None else lo <= value
        if high_fn is not None:
            value = high_fn(row)
        below = None if hi is None else value <= hi
        if above is False or below is False:
            return negated
        if above is None or below is None:
            return None
        return not negated

    return Compiled(between, "BOOLEAN")


def _like(expr: ast.Like, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    pattern = compile_expression(expr.pattern, scope)
    for side in (operand, pattern):
        if side.type not in (*values.TEXT_TYPES, "NULL"):
            raise TypeMismatch(f"LIKE compares text, not {side.type}")
    fn, negated = operand.fn, expr.negated
    if pattern.constant:
        text = pattern.fn(())
        matcher = like_matcher(text) if text is not None else None

        def like_constant(row: Sequence[Any]) -> Any:
            value = fn(row)
            if value is None or matcher is None:
                return None
            return matcher(value) != negated

        return Compiled(like_constant, "BOOLEAN")
    pfn = pattern.fn

    def like_dynamic(row: Sequence[Any]) -> Any:
        value, text = fn(row), pfn(row)
        if value is None or text is None:
            return None
        return like_matcher(text)(value) != negated

    return Compiled(like_dynamic, "BOOLEAN")


def _case(expr: ast.Case, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope) if expr.operand else None
    conditions = []
    results = []
    for condition, result in expr.whens:
        compiled_condition = compile_expression(condition, scope)
        if operand is not None:
            comparable(operand, compiled_condition, "CASE")
        conditions.append(compiled_condition.fn)
        results.append(compile_expression(result, scope))
    if expr.else_:
        results.append(compile_expression(expr.else_, scope))
    results = timestamps_of_text(results)  # `ELSE '2026-01-01'` among timestamps is one
    result_type = common_type([r.type for r in results], "CASE")
    whens = [(c, r.fn) for c, r in zip(conditions, results[: len(conditions)], strict=True)]
    else_fn = results[-1].fn if expr.else_ else (lambda row: None)
    if operand is None:

        def searched(row: Sequence[Any]) -> Any:
            for condition_fn, result_fn in whens:
                if condition_fn(row) is True:
                    return result_fn(row)
            return else_fn(row)

        return Compiled(searched, result_type)
    operand_fn = operand.fn

    def simple(row: Sequence[Any]) -> Any:
        value = operand_fn(row)
        if value is not None:
            for condition_fn, result_fn in whens:
                if condition_fn(row) == value:
                    return result_fn(row)
        return else_fn(row)

    return Compiled(simple, result_type)


def _cast(expr: ast.Cast, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    if expr.element is not None:  # `x::int4[]`
        return array_cast(operand, expr.element)
    fn, source, target = operand.fn, operand.type, expr.type
    refuse_blob(source, "CAST")
    if source == "BOOLEAN" and target == "TIMESTAMP":
        raise TypeMismatch("cannot cast BOOLEAN to TIMESTAMP")
    return Compiled(lambda row: cast_value(fn(row), source, target), target, operand.constant)


# -- functions ---------------------------------------------------------------------------


def _function(expr: ast.FuncCall, scope: Scope) -> Compiled:
    name = expr.name
    if name in AGGREGATES:
        raise SqlError(f"aggregate {name}() is not allowed in {scope.clause}")
    custom = scope.functions.get(name)
    if custom is not None:
        return custom(expr, scope)
    builder = FUNCTIONS.get(name)
    if builder is None:
        raise UnknownFunction(f"function {name}() does not exist")
    args = [compile_expression(a, scope) for a in expr.args]
    for arg in args:
        refuse_blob(arg.type, f"{name}()")
    return builder(name, args, scope)


_HANDLERS: dict[type, Callable[[Any, Scope], Compiled]] = {
    ast.Literal: _literal,
    ast.Param: _param,
    ast.ColumnRef: _column,
    ast.Star: _star,
    ast.Binary: _binary,
    ast.Unary: _unary,
    ast.IsNull: _is_null,
    ast.InList: _in_list,
    ast.Between: _between,
    ast.Like: _like,
    ast.Case: _case,
    ast.Cast: _cast,
    ast.FuncCall: _function,
    **subquery_handlers(compile_expression),
    **array_handlers(compile_expression),
}


def contains_aggregate(expr: ast.Expr | None) -> bool:
    """True when an aggregate call appears anywhere in the expression."""
    return any(True for _ in aggregate_calls(expr))


def is_grouped(select: ast.Select) -> bool:
    """Whether a select groups its rows: GROUP BY, HAVING, or an aggregate in its list."""
    return bool(
        select.group_by
        or select.having is not None
        or any(contains_aggregate(item.expr) for item in select.items)
    )


def aggregate_calls(expr: ast.Expr | None) -> Iterator[ast.FuncCall]:
    """Every aggregate call in the expression, outermost first (not inside other ones)."""
    if expr is None:
        return
    if isinstance(expr, ast.FuncCall) and expr.name in AGGREGATES:
        yield expr
        return
    for child in children(expr):
        yield from aggregate_calls(child)


def distinct_aggregate_calls(sites: Iterable[ast.Expr | None]) -> list[ast.FuncCall]:
    """The aggregate calls of the expressions (as `aggregate_calls`), each once, in the
    order they come first: the accumulators a grouped query keeps."""
    calls: list[ast.FuncCall] = []
    for site in sites:
        for call in aggregate_calls(site):
            if call not in calls:
                calls.append(call)
    return calls


def children(expr: ast.Expr) -> list[ast.Expr]:
    """The direct sub-expressions of a node."""
    if isinstance(expr, ast.Binary):
        return [expr.left, expr.right]
    if isinstance(expr, ast.Unary | ast.IsNull | ast.Cast | ast.InSubquery | ast.Quantified):
        return [expr.operand]
    if isinstance(expr, ast.InList):
        return [expr.operand, *expr.items]
    if isinstance(expr, ast.Between):
        return [expr.operand, expr.low, expr.high]
    if isinstance(expr, ast.Like):
        return [expr.operand, expr.pattern]
    if isinstance(expr, ast.Case):
        nodes = [expr.operand] if expr.operand else []
        for condition, result in expr.whens:
            nodes += [condition, result]
        if expr.else_ is not None:
            nodes.append(expr.else_)
        return nodes
    if isinstance(expr, ast.FuncCall):
        return list(expr.args)
    if isinstance(expr, ast.Subscript):
        return [expr.array, expr.index]
    if isinstance(expr, ast.ArrayQuantified):
        return [expr.operand, expr.array]
    if isinstance(expr, ast.ArrayValue):
        return list(expr.items)
    return []

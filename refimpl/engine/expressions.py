"""Expressions compiled to Python closures over a row tuple.

`compile_expression(expr, scope)` checks names and types once and returns a `Compiled`:
a function from a row to a value, and the SQL type of that value. NULL propagates as in
SQL: arithmetic and comparisons with NULL give NULL, AND/OR use three-valued logic, and a
WHERE keeps a row only when its condition is TRUE.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from refimpl.engine import values
from refimpl.errors import (
    AmbiguousColumn,
    InvalidValue,
    ParameterError,
    SqlError,
    TypeMismatch,
    UnknownColumn,
    UnknownFunction,
)
from refimpl.sql import ast

Evaluator = Callable[[Sequence[Any]], Any]

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max", "first", "last"})
TRUNC_UNITS = ("second", "minute", "hour", "day", "week", "month", "year")


@dataclass(frozen=True, slots=True)
class Compiled:
    fn: Evaluator
    type: str
    constant: bool = False


@dataclass(slots=True)
class ScopeColumn:
    index: int
    type: str
    name: str
    qualifier: str | None = None


@dataclass
class Scope:
    """What names mean while compiling: columns by name, and precomputed nodes.

    `slots` maps whole expression nodes (GROUP BY keys, aggregate calls) to a position in
    the row, so that after grouping `sum(x) + 1` reads `sum(x)` from its slot.
    """

    columns: list[ScopeColumn]
    qualifiers: frozenset[str] = frozenset()
    params: Sequence[Any] = ()
    slots: dict[ast.Expr, tuple[int, str]] = field(default_factory=dict)
    now: int = 0
    functions: dict[str, Callable[..., Compiled]] = field(default_factory=dict)
    clause: str = "the query"

    def resolve(self, ref: ast.ColumnRef) -> ScopeColumn:
        lowered = ref.name.lower()
        if ref.table is not None and ref.table.lower() not in self.qualifiers:
            raise UnknownColumn(f"{ref.table}.{ref.name}")
        matches = [c for c in self.columns if c.name.lower() == lowered]
        if ref.table is not None:
            qualified = [c for c in matches if c.qualifier in (None, ref.table.lower())]
            matches = qualified
        if not matches:
            raise UnknownColumn(ref.name)
        if len(matches) > 1:
            raise AmbiguousColumn(f"column name '{ref.name}' is ambiguous")
        return matches[0]


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
    return Compiled(lambda row: value, expr.type, constant=True)


def _param(expr: ast.Param, scope: Scope) -> Compiled:
    if expr.index >= len(scope.params):
        raise ParameterError(
            f"the statement has more ? placeholders than the {len(scope.params)}"
            " parameter(s) given"
        )
    value = scope.params[expr.index]
    type_ = values.type_of_value(value)
    if type_ == "TIMESTAMP":
        value = values.coerce(value, "TIMESTAMP", "?")
    return Compiled(lambda row: value, type_, constant=True)


def _column(expr: ast.ColumnRef, scope: Scope) -> Compiled:
    column = scope.resolve(expr)
    index = column.index
    return Compiled(lambda row: row[index], column.type)


def _star(expr: ast.Star, scope: Scope) -> Compiled:
    raise SqlError(f"* is not allowed in {scope.clause}")


# -- operators ---------------------------------------------------------------------------


def _is_numeric(type_: str) -> bool:
    return type_ in values.NUMERIC_TYPES or type_ == "NULL"


def _numeric_result(left: str, right: str) -> str:
    if "DOUBLE" in (left, right):
        return "DOUBLE"
    if "BIGINT" in (left, right):
        return "BIGINT"
    if left == "NULL" and right == "NULL":
        return "INT"
    return "INT"


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

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _family(type_: str) -> str:
    if type_ in values.NUMERIC_TYPES:
        return "number"
    if type_ in values.TEXT_TYPES:
        return "text"
    return type_


def comparable(left: Compiled, right: Compiled, what: str) -> tuple[Compiled, Compiled]:
    """Make two operands comparable: text constants next to a TIMESTAMP become times."""
    if left.type == "TIMESTAMP" and right.type in values.TEXT_TYPES and right.constant:
        right = _as_timestamp_constant(right)
    elif right.type == "TIMESTAMP" and left.type in values.TEXT_TYPES and left.constant:
        left = _as_timestamp_constant(left)
    if "NULL" not in (left.type, right.type) and _family(left.type) != _family(right.type):
        raise TypeMismatch(f"cannot compare {left.type} with {right.type} in {what}")
    return left, right


def _as_timestamp_constant(compiled: Compiled) -> Compiled:
    text = compiled.fn(())
    micros = None if text is None else values.parse_timestamp(text)
    return Compiled(lambda row: micros, "TIMESTAMP", constant=True)


def _binary(expr: ast.Binary, scope: Scope) -> Compiled:
    op = expr.op
    left = compile_expression(expr.left, scope)
    right = compile_expression(expr.right, scope)
    lf, rf = left.fn, right.fn
    constant = left.constant and right.constant
    if op == "AND":
        _require_boolean(left, "AND")
        _require_boolean(right, "AND")

        def conjunction(row: Sequence[Any]) -> Any:
            a = lf(row)
            if a is False:
                return False
            b = rf(row)
            if b is False:
                return False
            if a is None or b is None:
                return None
            return True

        return Compiled(conjunction, "BOOLEAN", constant)
    if op == "OR":
        _require_boolean(left, "OR")
        _require_boolean(right, "OR")

        def disjunction(row: Sequence[Any]) -> Any:
            a = lf(row)
            if a is True:
                return True
            b = rf(row)
            if b is True:
                return True
            if a is None or b is None:
                return None
            return False

        return Compiled(disjunction, "BOOLEAN", constant)
    if op in _COMPARE:
        left, right = comparable(left, right, f"'{op}'")
        lf, rf = left.fn, right.fn
        compare = _COMPARE[op]

        def comparison(row: Sequence[Any]) -> Any:
            a = lf(row)
            if a is None:
                return None
            b = rf(row)
            if b is None:
                return None
            return compare(a, b)

        return Compiled(comparison, "BOOLEAN", constant)
    if op == "||":

        def concat(row: Sequence[Any]) -> Any:
            a = lf(row)
            b = rf(row)
            if a is None or b is None:
                return None
            return values.to_text(a, left.type) + values.to_text(b, right.type)

        return Compiled(concat, "STRING", constant)
    if op in _ARITHMETIC:
        result_type = _arithmetic_type(op, left.type, right.type)
        arithmetic = _ARITHMETIC[op]

        def calculate(row: Sequence[Any]) -> Any:
            a = lf(row)
            if a is None:
                return None
            b = rf(row)
            if b is None:
                return None
            return arithmetic(a, b)

        return Compiled(calculate, result_type, constant)
    raise SqlError(f"unknown operator {op}")


def _arithmetic_type(op: str, left: str, right: str) -> str:
    if _is_numeric(left) and _is_numeric(right):
        return _numeric_result(left, right)
    if op == "-" and left == "TIMESTAMP" and right == "TIMESTAMP":
        return "BIGINT"
    if op in "+-" and left == "TIMESTAMP" and right in values.INTEGER_TYPES:
        return "TIMESTAMP"
    raise TypeMismatch(f"operator '{op}' cannot combine {left} and {right}")


def _require_boolean(compiled: Compiled, what: str) -> None:
    if compiled.type not in ("BOOLEAN", "NULL"):
        raise TypeMismatch(f"{what} needs BOOLEAN operands, not {compiled.type}")


def _unary(expr: ast.Unary, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    fn = operand.fn
    if expr.op == "NOT":
        _require_boolean(operand, "NOT")
        return Compiled(lambda row: None if (v := fn(row)) is None else not v, "BOOLEAN",
                        operand.constant)
    if not _is_numeric(operand.type):
        raise TypeMismatch(f"unary '{expr.op}' needs a number, not {operand.type}")
    if expr.op == "-":
        return Compiled(lambda row: None if (v := fn(row)) is None else -v, operand.type,
                        operand.constant)
    return operand


def _is_null(expr: ast.IsNull, scope: Scope) -> Compiled:
    fn = compile_expression(expr.operand, scope).fn
    if expr.negated:
        return Compiled(lambda row: fn(row) is not None, "BOOLEAN")
    return Compiled(lambda row: fn(row) is None, "BOOLEAN")


def _in_list(expr: ast.InList, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    items = [comparable(operand, compile_expression(i, scope), "IN")[1] for i in expr.items]
    fn, negated = operand.fn, expr.negated
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
    low = comparable(operand, compile_expression(expr.low, scope), "BETWEEN")[1]
    high = comparable(operand, compile_expression(expr.high, scope), "BETWEEN")[1]
    fn, lfn, hfn, negated = operand.fn, low.fn, high.fn, expr.negated

    def between(row: Sequence[Any]) -> Any:
        value, lo, hi = fn(row), lfn(row), hfn(row)
        if value is None or lo is None or hi is None:
            return None
        return (lo <= value <= hi) != negated

    return Compiled(between, "BOOLEAN")


def like_regex(pattern: str) -> re.Pattern[str]:
    """A LIKE pattern (% any run, _ one character, case-sensitive) as a regex."""
    parts = []
    for char in pattern:
        if char == "%":
            parts.append(".*")
        elif char == "_":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    return re.compile("".join(parts), re.DOTALL)


def _like(expr: ast.Like, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    pattern = compile_expression(expr.pattern, scope)
    for side in (operand, pattern):
        if side.type not in (*values.TEXT_TYPES, "NULL"):
            raise TypeMismatch(f"LIKE compares text, not {side.type}")
    fn, negated = operand.fn, expr.negated
    if pattern.constant:
        text = pattern.fn(())
        regex = like_regex(text) if text is not None else None

        def like_constant(row: Sequence[Any]) -> Any:
            value = fn(row)
            if value is None or regex is None:
                return None
            return (regex.fullmatch(value) is not None) != negated

        return Compiled(like_constant, "BOOLEAN")
    pfn = pattern.fn

    def like_dynamic(row: Sequence[Any]) -> Any:
        value, text = fn(row), pfn(row)
        if value is None or text is None:
            return None
        return (like_regex(text).fullmatch(value) is not None) != negated

    return Compiled(like_dynamic, "BOOLEAN")


def _case(expr: ast.Case, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope) if expr.operand else None
    whens = []
    result_types = []
    for condition, result in expr.whens:
        compiled_condition = compile_expression(condition, scope)
        if operand is not None:
            comparable(operand, compiled_condition, "CASE")
        compiled_result = compile_expression(result, scope)
        whens.append((compiled_condition.fn, compiled_result.fn))
        result_types.append(compiled_result.type)
    otherwise = compile_expression(expr.else_, scope) if expr.else_ else None
    if otherwise is not None:
        result_types.append(otherwise.type)
    result_type = _common_type(result_types, "CASE")
    else_fn = otherwise.fn if otherwise else (lambda row: None)
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


def _common_type(types: list[str], what: str) -> str:
    known = [t for t in types if t != "NULL"]
    if not known:
        return "NULL"
    if all(_is_numeric(t) for t in known):
        result = known[0]
        for other in known[1:]:
            result = _numeric_result(result, other)
        return result
    if all(t in values.TEXT_TYPES for t in known):
        return "STRING" if "STRING" in known else "SYMBOL"
    if len(set(known)) == 1:
        return known[0]
    raise TypeMismatch(f"{what} mixes values of types {', '.join(sorted(set(known)))}")


def cast_value(value: Any, source: str, target: str) -> Any:
    """CAST semantics; InvalidValue when the value cannot become the target type."""
    if value is None:
        return None
    if target in values.TEXT_TYPES:
        return values.to_text(value, source)
    if target in values.INTEGER_TYPES:
        if isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise InvalidValue(f"cannot cast '{value}' to {target}") from None
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise InvalidValue(f"cannot cast {value} to {target}")
            value = int(value)
        return values.coerce(int(value), target, "CAST")
    if target == "DOUBLE":
        try:
            return float(value)
        except ValueError:
            raise InvalidValue(f"cannot cast '{value}' to DOUBLE") from None
    if target == "BOOLEAN":
        if isinstance(value, str):
            return values.parse_text(value, "BOOLEAN", "CAST")
        return bool(value)
    if target == "TIMESTAMP":
        if isinstance(value, str):
            return values.parse_timestamp(value)
        if isinstance(value, float):
            return int(value)
        return value
    raise TypeMismatch(f"cannot cast to {target}")


def _cast(expr: ast.Cast, scope: Scope) -> Compiled:
    operand = compile_expression(expr.operand, scope)
    fn, source, target = operand.fn, operand.type, expr.type
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
    builder = _FUNCTIONS.get(name)
    if builder is None:
        raise UnknownFunction(f"function {name}() does not exist")
    args = [compile_expression(a, scope) for a in expr.args]
    return builder(name, args, scope)


def _arity(name: str, args: list[Compiled], *counts: int) -> None:
    if len(args) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise SqlError(f"{name}() takes {wanted} argument(s), not {len(args)}")


def _text_function(transform: Callable[[str], Any], result: str) -> Callable[..., Compiled]:
    def build(name: str, args: list[Compiled], scope: Scope) -> Compiled:
        _arity(name, args, 1)
        if args[0].type not in (*values.TEXT_TYPES, "NULL"):
            raise TypeMismatch(f"{name}() needs text, not {args[0].type}")
        fn = args[0].fn
        return Compiled(lambda row: None if (v := fn(row)) is None else transform(v), result,
                        args[0].constant)

    return build


def _coalesce(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    if not args:
        raise SqlError("coalesce() needs at least one argument")
    result_type = _common_type([a.type for a in args], "coalesce()")
    fns = [a.fn for a in args]

    def first_not_null(row: Sequence[Any]) -> Any:
        for fn in fns:
            value = fn(row)
            if value is not None:
                return value
        return None

    return Compiled(first_not_null, result_type)


def _abs(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 1)
    if not _is_numeric(args[0].type):
        raise TypeMismatch(f"abs() needs a number, not {args[0].type}")
    fn = args[0].fn
    return Compiled(lambda row: None if (v := fn(row)) is None else abs(v), args[0].type)


def _round(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 1, 2)
    if not _is_numeric(args[0].type):
        raise TypeMismatch(f"round() needs a number, not {args[0].type}")
    fn = args[0].fn
    digits_fn = args[1].fn if len(args) == 2 else (lambda row: 0)

    def round_half_away(row: Sequence[Any]) -> Any:
        value, digits = fn(row), digits_fn(row)
        if value is None or digits is None:
            return None
        if isinstance(value, int):
            return value
        factor = 10.0**digits
        return math.copysign(math.floor(abs(value) * factor + 0.5) / factor, value)

    return Compiled(round_half_away, args[0].type)


def _now(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 0)
    moment = scope.now
    return Compiled(lambda row: moment, "TIMESTAMP", constant=True)


def truncate_timestamp(unit: str, micros: int) -> int:
    """date_trunc: the start of the unit holding the time (weeks start on Monday)."""
    if unit == "second":
        return micros - micros % 1_000_000
    if unit == "minute":
        return micros - micros % 60_000_000
    if unit == "hour":
        return micros - micros % 3_600_000_000
    day_start = micros - micros % 86_400_000_000
    if unit == "day":
        return day_start
    moment = values.timestamp_to_datetime(day_start)
    if unit == "week":
        moment -= timedelta(days=moment.weekday())
    elif unit == "month":
        moment = moment.replace(day=1)
    else:
        moment = moment.replace(month=1, day=1)
    return values.datetime_to_timestamp(moment)


def _date_trunc(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 2)
    unit_arg, time_arg = args
    if time_arg.type in values.TEXT_TYPES and time_arg.constant:
        time_arg = _as_timestamp_constant(time_arg)
    if time_arg.type not in ("TIMESTAMP", "NULL"):
        raise TypeMismatch(f"date_trunc() truncates a TIMESTAMP, not {time_arg.type}")
    if not unit_arg.constant:
        raise SqlError("date_trunc() takes its unit as a constant such as 'minute'")
    unit = unit_arg.fn(())
    if not isinstance(unit, str) or unit.lower() not in TRUNC_UNITS:
        raise InvalidValue(
            f"date_trunc() unit {unit!r} is unknown; use one of {', '.join(TRUNC_UNITS)}"
        )
    unit = unit.lower()
    fn = time_arg.fn
    return Compiled(
        lambda row: None if (v := fn(row)) is None else truncate_timestamp(unit, v), "TIMESTAMP"
    )


_FUNCTIONS: dict[str, Callable[[str, list[Compiled], Scope], Compiled]] = {
    "length": _text_function(len, "INT"),
    "lower": _text_function(str.lower, "STRING"),
    "upper": _text_function(str.upper, "STRING"),
    "coalesce": _coalesce,
    "abs": _abs,
    "round": _round,
    "now": _now,
    "date_trunc": _date_trunc,
}

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
}


def contains_aggregate(expr: ast.Expr | None) -> bool:
    """True when an aggregate call appears anywhere in the expression."""
    return any(True for _ in aggregate_calls(expr))


def aggregate_calls(expr: ast.Expr | None):  # noqa: ANN201 - a generator of FuncCall
    """Every aggregate call in the expression, outermost first (not inside other ones)."""
    if expr is None:
        return
    if isinstance(expr, ast.FuncCall) and expr.name in AGGREGATES:
        yield expr
        return
    for child in children(expr):
        yield from aggregate_calls(child)


def children(expr: ast.Expr) -> list[ast.Expr]:
    """The direct sub-expressions of a node."""
    if isinstance(expr, ast.Binary):
        return [expr.left, expr.right]
    if isinstance(expr, ast.Unary | ast.IsNull | ast.Cast):
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
    return []

"""Aggregate functions: count, sum, total, avg, min, max, first, last, group_concat, string_agg,
array_agg, bool_and, bool_or.

`DISTINCT` works in each of them: the accumulator then sees each distinct non-NULL value once.
An ORDER BY inside the call (`array_agg(x ORDER BY y)`, PostgreSQL's) feeds it the group's
rows in that order; with DISTINCT, the first of each distinct value's rows in that order.

Each aggregate is an `Accumulator`: a factory of per-group state, a step that folds one input
row in, and a final that turns the state into the value. first() and last() follow the
table's time order (the TIMESERIES column) when the table has one, else the read order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refimpl.engine.query.arrays import array_text
from refimpl.engine.query.compiled import (
    LONGEST_NUMBER_TEXT,
    NUMBER_TEXT,
    Scope,
    refuse_blob,
)
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
from refimpl.engine.query.ordering import sort_rows
from refimpl.engine.storage import values
from refimpl.errors import SqlError, TypeMismatch
from refimpl.sql import ast

Row = Sequence[Any]


@dataclass(frozen=True, slots=True)
class Accumulator:
    type: str
    new_state: Callable[[], list[Any]]
    step: Callable[[list[Any], Row], None]
    final: Callable[[list[Any]], Any]


def make_accumulator(call: ast.FuncCall, scope: Scope, time_index: int | None) -> Accumulator:
    """The accumulator of one aggregate call, its argument compiled against `scope`."""
    accumulator = _unordered(call, scope, time_index)
    if not call.order_by:
        return accumulator
    if any(contains_aggregate(order.expr) for order in call.order_by):
        raise SqlError(f"aggregate calls cannot be nested inside {call.name}()")
    return _ordered(accumulator, call, scope)


def _ordered(inner: Accumulator, call: ast.FuncCall, scope: Scope) -> Accumulator:
    """`inner` fed its group's rows in the order of the call's own ORDER BY (stable: ties
    keep the order read), when the group is done."""
    order_fns = [(compile_expression(o.expr, scope).fn, o) for o in call.order_by]
    if call.distinct:
        # PostgreSQL: "in an aggregate with DISTINCT, ORDER BY expressions must appear in
        # argument list"; otherwise which of a value's rows counts would be undefined.
        if any(order.expr not in call.args for order in call.order_by):
            raise SqlError(
                f"in {call.name}(DISTINCT ... ORDER BY ...), each ORDER BY expression must be"
                " one of its arguments"
            )

    def final(state: list[Any]) -> Any:
        inner_state = inner.new_state()
        for row in sort_rows(state, order_fns):
            inner.step(inner_state, row)
        return inner.final(inner_state)

    return Accumulator(inner.type, list, lambda state, row: state.append(row), final)


def _unordered(call: ast.FuncCall, scope: Scope, time_index: int | None) -> Accumulator:
    name = call.name
    if call.star:
        if name != "count":
            raise SqlError(f"{name}(*) is not allowed; only count(*) takes *")
        return _count_rows()
    if any(contains_aggregate(arg) for arg in call.args):
        raise SqlError(f"aggregate calls cannot be nested inside {name}()")
    if name in ("group_concat", "string_agg"):
        return _concatenation(call, scope)
    if len(call.args) != 1:
        raise SqlError(f"{name}() takes 1 argument, not {len(call.args)}")
    argument = compile_expression(call.args[0], scope)
    accumulator = _of_one_argument(name, argument.fn, argument.type, time_index)
    return _distinct(accumulator, argument.fn) if call.distinct else accumulator


def _of_one_argument(
    name: str, fn: Callable[[Row], Any], arg_type: str, time_index: int | None
) -> Accumulator:
    if name == "count":
        return _count_values(fn)
    if name in ("sum", "avg", "total"):
        if arg_type in values.TEXT_TYPES:
            fn, arg_type = _text_as_number(fn), "DOUBLE"
        if arg_type not in (*values.NUMERIC_TYPES, "NULL"):
            raise TypeMismatch(f"{name}() adds numbers, not {arg_type}")
        if name == "avg":
            return _average(fn)
        if name == "total":
            return _total(fn)
        return _sum(fn, "DOUBLE" if arg_type == "DOUBLE" else "BIGINT")
    if name in ("min", "max"):
        return _extreme(fn, arg_type, name == "max")
    if name == "array_agg":
        return _array(fn, arg_type)
    if name in ("bool_and", "bool_or"):
        if arg_type not in ("BOOLEAN", "NULL"):
            raise TypeMismatch(f"{name}() takes a BOOLEAN, not {arg_type}")
        return _all_or_any(fn, name == "bool_and")
    return _first_last(fn, arg_type, time_index, last=name == "last")


def _text_as_number(fn: Callable[[Row], Any]) -> Callable[[Row], Any]:
    """Text as sum(), avg() and total() read it (SQLite's rule): the number it writes, and 0
    for text that is not a number."""

    def number(row: Row) -> Any:
        text = fn(row)
        if text is None:
            return None
        if len(text) > LONGEST_NUMBER_TEXT or not NUMBER_TEXT.fullmatch(text):
            return 0.0
        value = float(text)
        return value if math.isfinite(value) else 0.0

    return number


def _distinct(inner: Accumulator, fn: Callable[[Row], Any]) -> Accumulator:
    """`inner` fed each distinct non-NULL value of `fn` once (NULLs count for no aggregate)."""

    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None and value not in state[1]:
            state[1].add(value)
            inner.step(state[0], row)

    return Accumulator(
        inner.type, lambda: [inner.new_state(), set()], step, lambda state: inner.final(state[0])
    )


def _concatenation(call: ast.FuncCall, scope: Scope) -> Accumulator:
    """group_concat(x [, separator]) and string_agg(x, separator): the non-NULL values as
    text, in the order read, joined by the separator (',' for group_concat without one)."""
    name = call.name
    counts = (1, 2) if name == "group_concat" else (2,)
    if len(call.args) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise SqlError(f"{name}() takes {wanted} argument(s), not {len(call.args)}")
    if call.distinct and len(call.args) == 2:
        raise SqlError(
            f"{name}(DISTINCT x) takes no separator (as in SQLite): it joins the"
            " distinct values with ','; drop DISTINCT to choose the separator"
        )
    argument = compile_expression(call.args[0], scope)
    refuse_blob(argument.type, f"{name}()")
    separator = ","
    if len(call.args) == 2:
        compiled = compile_expression(call.args[1], scope)
        if not compiled.constant or compiled.type not in (*values.TEXT_TYPES, "NULL"):
            raise SqlError(f"{name}() takes its separator as a text constant such as ', '")
        separator = compiled.fn(()) or ""
    fn, arg_type = argument.fn, argument.type

    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state.append(values.to_text(value, arg_type))

    def final(state: list[Any]) -> Any:
        return separator.join(state) if state else None

    accumulator = Accumulator("STRING", list, step, final)
    return _distinct(accumulator, fn) if call.distinct else accumulator


def _count_rows() -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        state[0] += 1

    return Accumulator("BIGINT", lambda: [0], step, lambda state: state[0])


def _count_values(fn: Callable[[Row], Any]) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        if fn(row) is not None:
            state[0] += 1

    return Accumulator("BIGINT", lambda: [0], step, lambda state: state[0])


def _total(fn: Callable[[Row], Any]) -> Accumulator:
    """total(): the sum as a DOUBLE, 0.0 over no values (SQLite's total)."""

    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state[0] += value

    def final(state: list[Any]) -> Any:
        return values.in_range(float(state[0]), "DOUBLE", "total()")

    return Accumulator("DOUBLE", lambda: [0], step, final)


def _sum(fn: Callable[[Row], Any], result_type: str) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state[0] = value if state[0] is None else state[0] + value

    def final(state: list[Any]) -> Any:
        # A sum past its type's range is an error, as for `+`.
        return values.in_range(state[0], result_type, "sum()")

    return Accumulator(result_type, lambda: [None], step, final)


def _average(fn: Callable[[Row], Any]) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state[0] += value
            state[1] += 1

    def final(state: list[Any]) -> Any:
        return values.in_range(state[0] / state[1], "DOUBLE", "avg()") if state[1] else None

    return Accumulator("DOUBLE", lambda: [0, 0], step, final)


def _extreme(fn: Callable[[Row], Any], arg_type: str, largest: bool) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is None:
            return
        current = state[0]
        if current is None or (value > current if largest else value < current):
            state[0] = value

    return Accumulator(arg_type, lambda: [None], step, lambda state: state[0])


def _first_last(
    fn: Callable[[Row], Any], arg_type: str, time_index: int | None, last: bool
) -> Accumulator:
    if time_index is None:
        if last:

            def step_last(state: list[Any], row: Row) -> None:
                state[0] = fn(row)

            return Accumulator(arg_type, lambda: [None], step_last, lambda state: state[0])

        def step_first(state: list[Any], row: Row) -> None:
            if not state[1]:
                state[0] = fn(row)
                state[1] = True

        return Accumulator(arg_type, lambda: [None, False], step_first, lambda s: s[0])

    def step_timed(state: list[Any], row: Row) -> None:
        moment = row[time_index]
        seen = state[1]
        if seen is None or (moment >= seen if last else moment < seen):
            state[0] = fn(row)
            state[1] = moment

    return Accumulator(arg_type, lambda: [None, None], step_timed, lambda state: state[0])


def _array(fn: Callable[[Row], Any], arg_type: str) -> Accumulator:
    """array_agg(x): every value of the group, NULLs included, as an array of x's type
    (PostgreSQL's text of it, `{a,b}`; this engine keeps arrays as that text); NULL for no
    rows."""
    element = "STRING" if arg_type == "NULL" else arg_type
    if element.endswith("[]"):
        raise SqlError("array_agg() of arrays is not supported; aggregate their elements")

    def final(state: list[Any]) -> Any:
        return array_text([(value, element) for value in state]) if state else None

    return Accumulator(element + "[]", list, lambda state, row: state.append(fn(row)), final)


def _all_or_any(fn: Callable[[Row], Any], every: bool) -> Accumulator:
    """bool_and(x) / bool_or(x): whether every / any non-NULL x is true; NULL for none."""

    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state[0] = (
                value
                if state[0] is None
                else ((state[0] and value) if every else (state[0] or value))
            )

    return Accumulator("BOOLEAN", lambda: [None], step, lambda state: state[0])

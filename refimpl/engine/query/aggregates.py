"""Aggregate functions: count, sum, avg, min, max, first, last.

Each aggregate is an `Accumulator`: a factory of per-group state, a step that folds one input
row in, and a final that turns the state into the value. first() and last() follow the
table's time order (the TIMESERIES column) when the table has one, else the read order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refimpl.engine.query.compiled import Scope
from refimpl.engine.query.expressions import compile_expression, contains_aggregate
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
    name = call.name
    if call.star:
        if name != "count":
            raise SqlError(f"{name}(*) is not allowed; only count(*) takes *")
        return _count_rows()
    if len(call.args) != 1:
        raise SqlError(f"{name}() takes 1 argument, not {len(call.args)}")
    if contains_aggregate(call.args[0]):
        raise SqlError(f"aggregate calls cannot be nested inside {name}()")
    argument = compile_expression(call.args[0], scope)
    fn, arg_type = argument.fn, argument.type
    if name == "count":
        return _count_distinct(fn) if call.distinct else _count_values(fn)
    if call.distinct:
        raise SqlError(f"DISTINCT is supported in count() only, not in {name}()")
    if name in ("sum", "avg"):
        if arg_type not in (*values.NUMERIC_TYPES, "NULL"):
            raise TypeMismatch(f"{name}() adds numbers, not {arg_type}")
        if name == "avg":
            return _average(fn)
        return _sum(fn, "DOUBLE" if arg_type == "DOUBLE" else "BIGINT")
    if name in ("min", "max"):
        return _extreme(fn, arg_type, name == "max")
    return _first_last(fn, arg_type, time_index, last=name == "last")


def _count_rows() -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        state[0] += 1

    return Accumulator("BIGINT", lambda: [0], step, lambda state: state[0])


def _count_values(fn: Callable[[Row], Any]) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        if fn(row) is not None:
            state[0] += 1

    return Accumulator("BIGINT", lambda: [0], step, lambda state: state[0])


def _count_distinct(fn: Callable[[Row], Any]) -> Accumulator:
    def step(state: list[Any], row: Row) -> None:
        value = fn(row)
        if value is not None:
            state[0].add(value)

    return Accumulator("BIGINT", lambda: [set()], step, lambda state: len(state[0]))


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

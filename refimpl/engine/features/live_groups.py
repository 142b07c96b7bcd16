"""The state of one group of a maintained live query: its aggregates, taking rows in and out.

A maintained GROUP BY (`live_maintain`) keeps, per group, what each aggregate needs to give
its value again after a row joins or leaves the group, without reading the group's rows:

- count(*) and count(x): counts; sum(x) and avg(x) of integers: an exact total and a count;
- sum(x) and avg(x) of DOUBLE: the values in the order a fresh run reads them (a float sum
  depends on the order of its additions): a row read after all others adds to the total,
  any other change adds the group's values again in that order;
- min(x) and max(x): the values in order when rows may leave (a table with before-images),
  else only the extreme so far;
- first(x) and last(x): the values by (time, place in the read order) when rows may leave,
  else only the first or last so far.

Each value is the one the engine's own aggregate (`refimpl.engine.query.aggregates`) gives
over the group's rows read in table order: a property test holds the two to each other.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sortedcontainers import SortedDict, SortedList

from refimpl.engine.storage import values

# The aggregates kept: their names as the query calls them.
KEPT = frozenset({"count", "sum", "avg", "min", "max", "first", "last"})
Row = Sequence[Any]
_EMPTY: Any = object()  # no value yet


@dataclass(frozen=True, slots=True)
class Slot:
    """One aggregate of the query: `name`, its argument (None for count(*)), the type of its
    answer, whether it adds floats (order matters), whether rows may leave, and for first()
    and last() the row position of the table's time (None: by the read order alone)."""

    name: str
    argument: Callable[[Row], Any] | None
    type: str
    floats: bool = False
    retracts: bool = False
    time: int | None = None


class Group:
    """The rows of one group as its aggregates need them: `rows` counts them."""

    __slots__ = ("rows", "states")

    def __init__(self, slots: Sequence[Slot]) -> None:
        self.rows = 0
        self.states: list[Any] = [_new_state(slot) for slot in slots]

    def add(self, slots: Sequence[Slot], row: Row, order: Any) -> None:
        """Take in `row`, read at `order` (its place in a fresh run's reading)."""
        self.rows += 1
        states = self.states
        for at, slot in enumerate(slots):
            states[at] = _add(slot, states[at], row, order)

    def remove(self, slots: Sequence[Slot], row: Row, order: Any) -> None:
        """Let `row` (taken in before at `order`) go; only for slots that `retracts`."""
        self.rows -= 1
        states = self.states
        for at, slot in enumerate(slots):
            states[at] = _remove(slot, states[at], row, order)

    def finals(self, slots: Sequence[Slot]) -> list[Any]:
        return [_final(slot, state) for slot, state in zip(slots, self.states, strict=True)]


def _new_state(slot: Slot) -> Any:
    name = slot.name
    if name == "count":
        return 0
    if name in ("sum", "avg"):
        # Floats: [values by order, the running total or _EMPTY to add again, the last
        # order]. The values are a list of (order, value) while they came in order (a
        # table read, appended trades), a SortedDict once one did not.
        return [[], None, None] if slot.floats else [0, 0]
    if slot.retracts:
        return SortedList() if name in ("min", "max") else SortedDict()
    return None if name in ("min", "max") else (_EMPTY, None)


def _add(slot: Slot, state: Any, row: Row, order: Any) -> Any:
    name, argument = slot.name, slot.argument
    if argument is None:
        return state + 1
    value = argument(row)
    if name in ("first", "last"):
        if slot.time is not None:
            order = (row[slot.time], order)
        if slot.retracts:
            state[order] = value
            return state
        best = state[0]
        if best is _EMPTY or (order > best if name == "last" else order < best):
            return (order, value)
        return state
    if value is None:
        return state
    if name == "count":
        return state + 1
    if name in ("min", "max"):
        if slot.retracts:
            state.add(value)
            return state
        if state is None or (value > state if name == "max" else value < state):
            return value
        return state
    if not slot.floats:
        state[0] += value
        state[1] += 1
        return state
    ordered, total, last = state
    if last is None or order > last:
        # Read after every other value: a fresh run adds it last too.
        if type(ordered) is list:
            ordered.append((order, value))
        else:
            ordered[order] = value
        if total is not _EMPTY:
            state[1] = value if total is None else total + value
        state[2] = order
        return state
    if type(ordered) is list:
        ordered = state[0] = SortedDict(ordered)
    ordered[order] = value
    state[1] = _EMPTY
    return state


def _remove(slot: Slot, state: Any, row: Row, order: Any) -> Any:
    name, argument = slot.name, slot.argument
    if argument is None:
        return state - 1
    if name in ("first", "last"):
        del state[order if slot.time is None else (row[slot.time], order)]
        return state
    value = argument(row)
    if value is None:
        return state
    if name == "count":
        return state - 1
    if name in ("min", "max"):
        state.remove(value)
        return state
    if not slot.floats:
        state[0] -= value
        state[1] -= 1
        return state
    ordered = state[0]
    if type(ordered) is list:
        ordered = state[0] = SortedDict(ordered)
    del ordered[order]
    state[1] = _EMPTY  # added again in order when asked
    state[2] = ordered.peekitem(-1)[0] if ordered else None
    return state


def _final(slot: Slot, state: Any) -> Any:
    name = slot.name
    if name == "count":
        return state
    if name in ("first", "last"):
        if slot.retracts:
            if not state:
                return None
            return state.peekitem(-1 if name == "last" else 0)[1]
        return None if state[0] is _EMPTY else state[1]
    if name in ("min", "max"):
        if slot.retracts:
            if not state:
                return None
            return state[-1] if name == "max" else state[0]
        return state
    if slot.floats:
        ordered = state[0]
        if not ordered:
            state[1], state[2] = None, None
            return None
        if state[1] is _EMPTY:
            taken = [v for _, v in ordered] if type(ordered) is list else ordered.values()
            state[1] = functools.reduce(operator.add, taken)
        total, count = state[1], len(ordered)
    else:
        total, count = state
        if not count:
            return None
    if name == "avg":
        # The engine's avg folds from 0: 0 + -0.0 is 0.0.
        return values.in_range((0 + total) / count, "DOUBLE", "avg()")
    return values.in_range(total, slot.type, "sum()")

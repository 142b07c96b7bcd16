"""Which secondary index, if any, a WHERE clause's `column op constant` terms can read.

An index serves the longest run of its first columns that the WHERE pins with `=`, then a
range (`<`, `<=`, `>`, `>=`, BETWEEN) on the next column. The longest run wins; a range on
top breaks ties, then a UNIQUE index, then the index with fewer columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from refimpl.engine.storage import values
from refimpl.engine.storage.access_hints import IndexProbe
from refimpl.engine.storage.indexes import Bound
from refimpl.engine.storage.schema import TableSchema
from refimpl.sql import ast


def choose_index(
    constraints: Sequence[tuple[str, str, Any]], schema: TableSchema
) -> IndexProbe | None:
    """The best probe for these (lower-case column, op, stored value) terms, or None."""
    best: tuple[tuple[int, int, int, int], IndexProbe] | None = None
    for definition in schema.all_indexes():
        probe = _probe(definition, constraints, schema)
        if probe is None:
            continue
        ranged = probe.low is not None or probe.high is not None
        score = (len(probe.prefix), ranged, definition.unique, -len(definition.columns))
        if best is None or score > best[0]:
            best = (score, probe)
    return None if best is None else best[1]


def _probe(
    definition: ast.IndexDef, constraints: Sequence[tuple[str, str, Any]], schema: TableSchema
) -> IndexProbe | None:
    prefix: list[Any] = []
    columns: list[str] = []
    for column in definition.columns:
        name = column.lower()
        equal = [v for c, op, v in constraints if c == name and op == "="]
        if not equal:
            break
        prefix.append(_stored(equal[0], schema.type_of(name)))
        columns.append(name)
    low = high = None
    if len(prefix) < len(definition.columns):
        name = definition.columns[len(prefix)].lower()
        kind = schema.type_of(name)
        for c, op, value in constraints:
            if c != name or op == "=":
                continue
            bound = Bound(_stored(value, kind), op in ("<=", ">="))
            if op in (">", ">="):
                low = _tighter(low, bound, larger=True)
            else:
                high = _tighter(high, bound, larger=False)
        if low is not None or high is not None:
            columns.append(name)
    if not prefix and low is None and high is None:
        return None
    return IndexProbe(definition.name.lower(), tuple(columns), tuple(prefix), low, high)


def _stored(value: Any, kind: str) -> Any:
    return int(value) if kind in values.INTEGER_TYPES else value


def _tighter(current: Bound | None, bound: Bound, larger: bool) -> Bound:
    if current is None or current.value == bound.value:
        if current is not None and not current.inclusive:
            return current
        return bound
    if (bound.value > current.value) == larger:
        return bound
    return current

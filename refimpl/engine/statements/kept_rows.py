"""A one-row INSERT's values kept as they are, tested by code made once for their columns.

A prepared INSERT's run most often gives values already of their columns' Python types and
within their ranges (an int within BIGINT's, a finite float, a text): its row is then
those values in the table's column order, nothing converted. `kept_row` makes, once per
shape of row, a function that tests each value by a comparison or two and builds the row
in one step, where general steps make a list, maps and getters at every run. When a value
is not of its column's type or range, the function answers None: the caller then converts
the values the general way (`values.coerce`), which also says what is wrong.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

Row = tuple[Any, ...]
# A value kept as it is: its Python type, and its low and high bounds (None: no bounds).
Check = tuple[type, Any, Any]
KeptRow = Callable[[Sequence[Any]], Row | None]

# Rows of more values than this get no function of their own (the caller's general steps
# serve them): the code made grows with the count of values.
MOST_VALUES = 64


@functools.lru_cache(maxsize=256)
def kept_row(checks: tuple[Check, ...], positions: tuple[int, ...], width: int) -> KeptRow:
    """The function of a run's values (as many as `checks`, 1 to MOST_VALUES) that gives
    the row of `width` columns, value i at column `positions[i]` and NULL in every column
    no value names, when each value is of its check's type and within its bounds; else
    None. A shape's function is made once: at most 256 are kept, the least used dropped
    first (a few KB each)."""
    assert 0 < len(checks) == len(positions) <= MOST_VALUES
    # The bounds and types are names of the function's globals, never written into its
    # text: only indices are.
    names: dict[str, Any] = {}
    tests = []
    for i, (kind, low, high) in enumerate(checks):
        names[f"K{i}"] = kind
        tests.append(f"type(v{i}) is K{i}")
        if low is not None:
            names[f"L{i}"], names[f"H{i}"] = low, high
            tests.append(f"L{i} <= v{i} <= H{i}")
    placed = ["None"] * width
    for i, position in enumerate(positions):
        placed[position] = f"v{i}"
    given = "".join(f"v{i}, " for i in range(len(checks)))
    text = (
        "def kept(values):\n"
        f"    {given}= values\n"
        f"    if {' and '.join(tests)}:\n"
        f"        return ({', '.join(placed)},)\n"
        "    return None\n"
    )
    exec(compile(text, "<kept_row>", "exec"), names)  # noqa: S102 - indices only, see above
    made: KeptRow = names["kept"]
    return made

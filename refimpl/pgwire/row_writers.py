"""DataRow messages written by a function made once per row shape.

A result's rows all have the same columns, so the per-row loop over columns (a zip, a
branch and three appends per value) can be unrolled once, when the shape is first sent,
into one function with a line per column; every later row of that shape, and every later
run of the prepared statement that owns the shape, pays only for its values. The text of
that function holds nothing of the data or of the column names: only numbered local names.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

RowsWriter = Callable[[Sequence[Sequence[object]]], bytes]

_NULL = b"\xff\xff\xff\xff"


def rows_writer(
    encoders: tuple[Callable[[object], bytes], ...], inline: Sequence[str | None] = ()
) -> RowsWriter:
    """A function that returns the DataRow messages of `rows`, byte for byte as
    `messages.DataRows(rows, encoders).encode()` does: each value None sent as NULL, any
    other made bytes by its column's encoder. A row of another length raises ValueError.

    `inline`, by column: an expression of the value `{v}` that gives the same bytes as the
    column's encoder `{e}`, written in the function's line instead of a call of it (a
    Python call costs more than most encoders' work); None: the encoder is called."""
    count = len(encoders)
    names = [f"v{i}" for i in range(count)]
    lines = [
        "def write(rows):",
        "    out = []",
        "    add = out.append",
        "    for row in rows:",
        f"        {', '.join(names)}{',' if count == 1 else ''} = row" if count else "        ...",
    ]
    for i, name in enumerate(names):
        lines.append(f"        if {name} is None:")
        lines.append(f"            p{i} = NULL")
        lines.append("        else:")
        expression = (inline[i] if i < len(inline) else None) or "{e}({v})"
        lines.append(f"            d = {expression.format(v=name, e=f'e{i}')}")
        lines.append(f"            p{i} = length(len(d)) + d")
    parts = " + ".join(["COUNT", *(f"p{i}" for i in range(count))])
    lines.append(f"        body = {parts}")
    lines.append("        add(head(b'D', len(body) + 4))")
    lines.append("        add(body)")
    lines.append("    return b''.join(out)")
    scope: dict[str, object] = {f"e{i}": encode for i, encode in enumerate(encoders)}
    scope |= {
        "NULL": _NULL,
        "COUNT": struct.pack("!h", count),
        "length": struct.Struct("!i").pack,
        "head": struct.Struct("!ci").pack,
    }
    exec(compile("\n".join(lines), "<pgwire rows writer>", "exec"), scope)
    writer = scope["write"]
    assert callable(writer)
    return writer

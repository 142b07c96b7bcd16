"""DataRow messages written by a function made once per row shape.

A result's rows all have the same columns, so the per-row loop over columns (a zip, a
branch and three appends per value) can be unrolled once, when the shape is first sent,
into one function with a line per column; every later row of that shape, and every later
run of the prepared statement that owns the shape, pays only for its values. The text of
that function holds nothing of the data or of the column names: only numbered local names.

Its code is made once for a shape's count of columns and how each is written (`_code_of`,
a bounded cache; the encoders are the function's globals), so a statement whose rows' shape
is made at every run (a simple query's) compiles nothing after its first. A shape of more
than `_UNROLLED` columns is written by a loop (`_write_looped`): unrolled code grows with the
columns, and a result of thousands would take the interpreter lock to compile for long.
"""

from __future__ import annotations

import builtins
import functools
import struct
from collections.abc import Callable, Sequence
from types import CodeType, FunctionType

from refimpl.pgwire.messages import DataRows

RowsWriter = Callable[[Sequence[Sequence[object]]], bytes]

_NULL = b"\xff\xff\xff\xff"


# Columns written by unrolled code at most; a wider shape's rows are written by a loop.
_UNROLLED = 32
_KEPT_CODES = 128  # code objects kept for shapes to come (each of at most _UNROLLED columns)
_LENGTH = struct.Struct("!i").pack
_HEAD = struct.Struct("!ci").pack


def rows_writer(
    encoders: tuple[Callable[[object], bytes], ...], inline: Sequence[str | None] = ()
) -> RowsWriter:
    """A function that returns the DataRow messages of `rows`, byte for byte as
    `messages.DataRows(rows, encoders).encode()` does: each value None sent as NULL, any
    other made bytes by its column's encoder. A row of another length raises ValueError.

    `inline`, by column: an expression of the value `{v}` that gives the same bytes as the
    column's encoder `{e}`, written in the function's line instead of a call of it (a
    Python call costs more than most encoders' work); None: the encoder is called. Past
    `_UNROLLED` columns every encoder is called, by a loop."""
    count = len(encoders)
    if count > _UNROLLED:
        return functools.partial(_write_looped, encoders)
    written = tuple(inline[i] if i < len(inline) else None for i in range(count))
    scope: dict[str, object] = {f"e{i}": encode for i, encode in enumerate(encoders)}
    scope |= {
        "__builtins__": builtins,
        "NULL": _NULL,
        "COUNT": struct.pack("!h", count),
        "length": _LENGTH,
        "head": _HEAD,
    }
    return FunctionType(_code_of(written), scope)


@functools.lru_cache(maxsize=_KEPT_CODES)
def _code_of(written: tuple[str | None, ...]) -> CodeType:
    """The code of a writer of `len(written)` columns, each written by its expression in
    `written` (None: its encoder called)."""
    count = len(written)
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
        expression = written[i] or "{e}({v})"
        lines.append(f"            d = {expression.format(v=name, e=f'e{i}')}")
        lines.append(f"            p{i} = length(len(d)) + d")
    parts = " + ".join(["COUNT", *(f"p{i}" for i in range(count))])
    lines.append(f"        body = {parts}")
    lines.append("        add(head(b'D', len(body) + 4))")
    lines.append("        add(body)")
    lines.append("    return b''.join(out)")
    module = compile("\n".join(lines), "<pgwire rows writer>", "exec")
    return next(const for const in module.co_consts if isinstance(const, CodeType))


def _write_looped(
    encoders: tuple[Callable[[object], bytes], ...], rows: Sequence[Sequence[object]]
) -> bytes:
    """The DataRow messages of `rows` of more than `_UNROLLED` columns: the column loop's."""
    return DataRows(rows, encoders).encode()

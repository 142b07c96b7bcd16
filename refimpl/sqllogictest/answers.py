"""Result values as sqllogictest writes them, sorted and hashed as it does.

The rules are those of the SQLite runner of sqllogictest (the expected answers of the corpus
are SQLite's): a column typed `I` shows an integer (a real is cut toward zero, text gives its
leading number or 0), `R` a number with three decimals, `T` the text (a number as SQLite
writes it); NULL is `NULL`, an empty text `(empty)`, and a character outside printable ASCII
`@`.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence
from decimal import Decimal

_LEADING_NUMBER = re.compile(r"^\s*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def format_value(value: object, kind: str) -> str:
    """One value as the runner writes it for a column of `kind` (I, R or T)."""
    if value is None:
        return "NULL"
    if kind == "I":
        return str(_as_integer(value))
    if kind == "R":
        return _real_three_places(_as_real(value))
    text = _as_text(value)
    if not text:
        return "(empty)"
    return "".join(c if " " <= c <= "~" else "@" for c in text)


def _real_three_places(value: float) -> str:
    """`%.3f` as SQLite's printf writes it: at most 16 significant digits, zeros after."""
    if not math.isfinite(value) or abs(value) < 1e15:
        return f"{value:.3f}"
    return f"{Decimal(f'{value:.16g}'):.3f}"


def _as_integer(value: object) -> int:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else 0
    return int(_as_real(value))


def _as_real(value: object) -> float:
    if isinstance(value, bool | int | float):
        return float(value)
    match = _LEADING_NUMBER.match(str(value))
    return float(match.group(0)) if match else 0.0


def _as_text(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return _real_text(value)
    return str(value)


def _real_text(value: float) -> str:
    """A real as SQLite writes it: 15 significant digits, always with a decimal point."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Inf" if value > 0 else "-Inf"
    text = f"{value:.15g}"
    mantissa, e, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return mantissa + (e + exponent if e else "")


def result_values(rows: Sequence[Sequence[object]], types: str, sort: str) -> list[str]:
    """The values of a query's rows, formatted by column type and sorted by the sort mode."""
    table = [[format_value(v, types[i]) for i, v in enumerate(row)] for row in rows]
    if sort == "rowsort":
        table.sort()
    values = [v for row in table for v in row]
    if sort == "valuesort":
        values.sort()
    return values


def values_hash(values: Sequence[str]) -> str:
    """The md5 of the values, each followed by a line break, as `N values hashing to`."""
    digest = hashlib.md5(usedforsecurity=False)
    for value in values:
        digest.update(value.encode("utf-8") + b"\n")
    return digest.hexdigest()

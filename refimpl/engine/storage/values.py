"""Column types and their values.

In the engine, INT and BIGINT are `int`, DOUBLE is `float`, STRING and SYMBOL are `str`,
BOOLEAN is `bool`, TIMESTAMP is `int` microseconds since 1970-01-01 UTC, NULL is `None`.
This module converts between those and text (SQL literals, CSV fields, JSON answers).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from refimpl.errors import InvalidValue, TypeMismatch

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1

INTEGER_TYPES = frozenset({"INT", "BIGINT"})
NUMERIC_TYPES = frozenset({"INT", "BIGINT", "DOUBLE"})
TEXT_TYPES = frozenset({"STRING", "SYMBOL"})

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)


def parse_timestamp(text: str) -> int:
    """ISO-8601 text (`2026-09-24T10:00:00Z`, `2026-09-24 10:00:00.5`, `2026-09-24`) to micros.

    Text without a zone is UTC. Raises InvalidValue naming the text.
    """
    candidate = text.strip()
    if candidate.endswith(("z", "Z")):
        candidate = candidate[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(candidate)
    except ValueError:
        raise InvalidValue(
            f"'{text}' is not a timestamp; write ISO-8601 text such as '2026-09-24T10:00:00Z'"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICRO


def format_timestamp(micros: int) -> str:
    """Micros to ISO-8601 UTC text ending in Z: milliseconds, or microseconds when needed."""
    moment = _EPOCH + timedelta(microseconds=micros)
    head = moment.strftime("%Y-%m-%dT%H:%M:%S")
    fraction = micros % 1_000_000
    if fraction % 1000:
        return f"{head}.{fraction:06d}Z"
    return f"{head}.{fraction // 1000:03d}Z"


def timestamp_to_datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


def datetime_to_timestamp(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICRO


def type_of_value(value: object) -> str:
    """The SQL type a Python value stands for (a parameter's type, say)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT" if INT_MIN <= value <= INT_MAX else "BIGINT"
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, datetime):
        return "TIMESTAMP"
    raise TypeMismatch(f"a value of Python type {type(value).__name__} cannot be used in SQL")


def coerce(value: object, column_type: str, column: str) -> object:
    """The value as stored in a column of `column_type`, or TypeMismatch naming the column.

    Allowed: integers into INT/BIGINT (range-checked) and DOUBLE; integral floats into
    INT/BIGINT; text or integer microseconds or datetimes into TIMESTAMP; text into
    STRING/SYMBOL; booleans into BOOLEAN.
    """
    if value is None:
        return None
    if column_type in INTEGER_TYPES:
        if isinstance(value, bool):
            raise _mismatch(value, column_type, column)
        if isinstance(value, float):
            if not value.is_integer():
                raise _mismatch(value, column_type, column)
            value = int(value)
        if not isinstance(value, int):
            raise _mismatch(value, column_type, column)
        low, high = (INT_MIN, INT_MAX) if column_type == "INT" else (BIGINT_MIN, BIGINT_MAX)
        if not low <= value <= high:
            raise InvalidValue(f"{value} is out of range for {column_type} column '{column}'")
        return value
    if column_type == "DOUBLE":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _mismatch(value, column_type, column)
        return float(value)
    if column_type in TEXT_TYPES:
        if not isinstance(value, str):
            raise _mismatch(value, column_type, column)
        return value
    if column_type == "BOOLEAN":
        if not isinstance(value, bool):
            raise _mismatch(value, column_type, column)
        return value
    if column_type == "TIMESTAMP":
        if isinstance(value, str):
            return parse_timestamp(value)
        if isinstance(value, datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            return datetime_to_timestamp(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise _mismatch(value, column_type, column)
    raise TypeMismatch(f"unknown type {column_type}")


def _mismatch(value: object, column_type: str, column: str) -> TypeMismatch:
    return TypeMismatch(
        f"column '{column}' is {column_type} and cannot take {type_of_value(value)} value"
        f" {value!r}"
    )


def parse_text(text: str, column_type: str, column: str) -> object:
    """A CSV field or similar text as a value of `column_type`; empty text is NULL."""
    if text == "":
        return None
    try:
        if column_type in INTEGER_TYPES:
            return coerce(int(text), column_type, column)
        if column_type == "DOUBLE":
            number = float(text)
            return number
        if column_type == "BOOLEAN":
            lowered = text.lower()
            if lowered in ("true", "t", "1"):
                return True
            if lowered in ("false", "f", "0"):
                return False
            raise ValueError(text)
        if column_type == "TIMESTAMP":
            return parse_timestamp(text)
    except ValueError:
        raise InvalidValue(f"'{text}' is not a valid {column_type} for column '{column}'") from None
    return text


def to_json(value: object, column_type: str) -> object:
    """A value as it appears in a JSON answer (DESIGN.md section 3)."""
    if value is None:
        return None
    if column_type == "TIMESTAMP":
        return format_timestamp(value)  # type: ignore[arg-type]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_text(value: object, column_type: str) -> str:
    """A value as plain text (CSV fields, the SQL shell)."""
    if value is None:
        return ""
    if column_type == "TIMESTAMP":
        return format_timestamp(value)  # type: ignore[arg-type]
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def parse_size(text: str) -> int:
    """'2GB', '512MB', '64KB', '1048576' to bytes; InvalidValue otherwise."""
    cleaned = text.strip().upper()
    number, factor = cleaned, 1
    for suffix, multiple in (("KB", 1024), ("MB", 1024**2), ("GB", 1024**3), ("B", 1)):
        if cleaned.endswith(suffix):
            number, factor = cleaned[: -len(suffix)].strip(), multiple
            break
    try:
        amount = float(number)
    except ValueError:
        raise InvalidValue(f"'{text}' is not a size; write it like '512MB' or '2GB'") from None
    if amount <= 0:
        raise InvalidValue(f"'{text}' is not a size; it must be more than 0")
    return int(amount * factor)

"""Column types and their values.

In the engine, INT, BIGINT and OID are `int`, DOUBLE is `float`, STRING and SYMBOL are `str`,
BOOLEAN is `bool`, TIMESTAMP is `int` microseconds since 1970-01-01 UTC, NULL is `None`.
This module converts between those and text (SQL literals, CSV fields, JSON answers), and
keeps every type's range (spec/types-and-values.md): a value out of its type's range is
refused on its way in, so that no stored value is one a reader cannot show.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from itertools import repeat
from operator import add, floordiv, itemgetter, sub
from typing import Any

from refimpl.errors import InvalidValue, TypeMismatch

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
BIGINT_MIN, BIGINT_MAX = -(2**63), 2**63 - 1
# 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z: the moments ISO-8601 text with a
# four-digit year can write.
TIMESTAMP_MIN, TIMESTAMP_MAX = -62_135_596_800_000_000, 253_402_300_799_999_999

OID_MAX = 2**32 - 1
# OID is the type of the catalog's object identifiers (PostgreSQL's `oid`): no table has a
# column of it; it compares and computes as an integer, and the PostgreSQL protocol tells it
# apart from BIGINT, as a client that reads the catalog by type (asyncpg) needs.
INTEGER_TYPES = frozenset({"INT", "BIGINT", "OID"})
NUMERIC_TYPES = frozenset({"INT", "BIGINT", "OID", "DOUBLE"})
TEXT_TYPES = frozenset({"STRING", "SYMBOL"})

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH = datetime(1970, 1, 1)  # isoformat() of an aware moment appends +00:00
_MICRO = timedelta(microseconds=1)
_MICROS_PER_DAY = 86_400_000_000
_RANGES = {
    "INT": (INT_MIN, INT_MAX),
    "BIGINT": (BIGINT_MIN, BIGINT_MAX),
    "OID": (0, OID_MAX),
    "TIMESTAMP": (TIMESTAMP_MIN, TIMESTAMP_MAX),
}
_RANGE_TEXT = {
    "INT": "-2147483648 to 2147483647",
    "BIGINT": "-9223372036854775808 to 9223372036854775807",
    "OID": "0 to 4294967295",
    "TIMESTAMP": "0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z",
    "DOUBLE": "finite numbers",
}


class TypedRows(list[tuple[Any, ...]]):
    """Rows of stored values already (made by `parse_text`, so range-checked), each a tuple
    whose values are of the column types `types`, in order; NULL fits any of them.

    An insert into columns of exactly these types keeps the rows as they are instead of
    converting every value again: an import converts its rows before it takes the
    database's write lock, and that lock is then held only to check and install them.
    `columns`, when given, names (lower-case) the columns the values were placed for: a
    bulk load checks them against the table as it is at the load, since a change of the
    table meanwhile may keep the types and move the columns.
    """

    __slots__ = ("types", "columns")

    def __init__(
        self,
        types: Iterable[str],
        rows: Iterable[tuple[Any, ...]] = (),
        columns: Iterable[str] = (),
    ) -> None:
        super().__init__(rows)
        self.types = tuple(types)
        self.columns = tuple(name.lower() for name in columns)


def shown(value: object) -> str:
    """A value for an error message: text quoted, anything long cut short."""
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def out_of_range(value: object, type_: str, what: str) -> InvalidValue:
    """The error for a value outside its type's range; `what` says where it came from."""
    unit = " microseconds" if type_ == "TIMESTAMP" else ""
    return InvalidValue(
        f"{what}: {shown(value)}{unit} is out of range for {type_} ({_RANGE_TEXT[type_]})"
    )


def in_range(value: Any, type_: str, what: str) -> Any:
    """`value` when it is within the range of `type_` (or NULL); InvalidValue otherwise.

    The one check every way in (literals, parameters, arithmetic, CAST, stored values, CSV
    fields, line-protocol values) goes through. `what` names the place for the message.
    """
    if value is None:
        return None
    bounds = _RANGES.get(type_)
    if bounds is not None:
        if not bounds[0] <= value <= bounds[1]:
            raise out_of_range(value, type_, what)
    elif type_ == "DOUBLE" and not math.isfinite(value):
        raise out_of_range(value, type_, what)
    return value


def as_double(value: int | float, what: str) -> float:
    """A number as a finite DOUBLE (an integer too large for one is an error, not inf)."""
    try:
        number = float(value)
    except OverflowError:
        raise out_of_range(value, "DOUBLE", what) from None
    in_range(number, "DOUBLE", what)
    return number


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
    micros = (moment - _EPOCH) // _MICRO
    if not TIMESTAMP_MIN <= micros <= TIMESTAMP_MAX:  # an offset past the first or last day
        raise InvalidValue(f"'{text}' is out of range for TIMESTAMP ({_RANGE_TEXT['TIMESTAMP']})")
    return micros


def format_timestamp(micros: int) -> str:
    """Micros to ISO-8601 UTC text ending in Z: milliseconds, or microseconds when needed.

    Never fails: a value outside the TIMESTAMP range (a log written before the range was
    kept may hold one) is written with an expanded year (`+029520-...`, `-000001-...`), as
    ISO-8601 and ECMAScript allow, so that a reader can always show what is stored.
    """
    if TIMESTAMP_MIN <= micros <= TIMESTAMP_MAX:
        # isoformat, not strftime (whose %Y writes the year 1 as '1'): four-digit years, and
        # C speed, which matters when a page of the change stream formats thousands.
        moment = _NAIVE_EPOCH + timedelta(microseconds=micros)
        if micros % 1000:
            return moment.isoformat(timespec="microseconds") + "Z"
        return moment.isoformat(timespec="milliseconds") + "Z"
    fraction = micros % 1_000_000
    days, day_micros = divmod(micros, _MICROS_PER_DAY)
    year, month, day = civil_from_days(days)
    seconds = day_micros // 1_000_000
    sign = "-" if year < 0 else "+"
    head = (
        f"{sign}{abs(year):06d}-{month:02d}-{day:02d}T{seconds // 3600:02d}:"
        f"{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    )
    if fraction % 1000:
        return f"{head}.{fraction:06d}Z"
    return f"{head}.{fraction // 1000:03d}Z"


def civil_from_days(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 to (year, month, day), proleptic Gregorian, for any integer
    (H. Hinnant's algorithm; year 0 is 1 BC)."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def timestamp_to_datetime(micros: int) -> datetime:
    """A TIMESTAMP as a datetime; InvalidValue for a stored value outside the range."""
    in_range(micros, "TIMESTAMP", "a stored TIMESTAMP")
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
        return "INT" if INT_MIN <= value <= INT_MAX else "BIGINT"  # in_range checks BIGINT
    if isinstance(value, float):
        return "DOUBLE"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, datetime):
        return "TIMESTAMP"
    raise TypeMismatch(f"a value of Python type {type(value).__name__} cannot be used in SQL")


def coerce(value: object, column_type: str, column: str) -> object:
    """The value as stored in a column of `column_type`, or TypeMismatch naming the column.

    Allowed: integers into INT/BIGINT and DOUBLE; integral floats into INT/BIGINT; text or
    integer microseconds or datetimes into TIMESTAMP; text into STRING/SYMBOL; booleans into
    BOOLEAN. Every value is range-checked for its column's type (`in_range`).
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
        return in_range(value, column_type, f"column '{column}'")
    if column_type == "DOUBLE":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _mismatch(value, column_type, column)
        if isinstance(value, int):
            in_range(value, "BIGINT", f"column '{column}'")
        return as_double(value, f"column '{column}'")
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
            value = datetime_to_timestamp(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return in_range(value, "TIMESTAMP", f"column '{column}'")
        raise _mismatch(value, column_type, column)
    raise TypeMismatch(f"unknown type {column_type}")


def _mismatch(value: object, column_type: str, column: str) -> TypeMismatch:
    return TypeMismatch(
        f"column '{column}' is {column_type} and cannot take {type_of_value(value)} value {value!r}"
    )


# More characters than any BIGINT needs (sign, 19 digits, spaces and underscores that int()
# takes): longer text is refused before int() reads it.
_LONGEST_INTEGER_TEXT = 40
_EMPTY_IS_NULL = {"": None}  # its get(text, text): None for an empty text, else the text


def parse_text(text: str, column_type: str, column: str) -> object:
    """A CSV field or similar text as a value of `column_type`; empty text is NULL.

    The one conversion of text to a stored value (CSV import calls it for every field): it
    refuses what `coerce` refuses, out-of-range values included, with InvalidValue.
    """
    if text == "":
        return None
    try:
        if column_type in INTEGER_TYPES:
            if len(text) > _LONGEST_INTEGER_TEXT:  # int() of a huge digit string is slow
                raise ValueError(text)
            return coerce(int(text), column_type, column)
        if column_type == "DOUBLE":
            return in_range(float(text), "DOUBLE", f"column '{column}'")
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
        raise InvalidValue(
            f"{shown(text)} is not a valid {column_type} for column '{column}'"
        ) from None
    return text


def parse_texts(texts: tuple[str, ...], column_type: str) -> list[Any] | None:
    """The values `parse_text` gives for each of `texts` (a column's fields), made
    by a few C calls over them all instead of Python frames for each; or None, and then the
    caller converts them by `parse_text`, which also finds the error if there is one.

    None whenever any text is one that `parse_text` refuses; also for texts that it would take
    but that these calls leave to it (an empty one, NULL, but in a STRING or SYMBOL column; a
    TIMESTAMP with spaces around or without a `Z`; every BOOLEAN). A list is exactly
    `parse_text`'s values, in order. Each call holds the interpreter lock for all of `texts`:
    callers pass a few hundred.
    """
    if column_type in TEXT_TYPES:  # each text itself, an empty one NULL
        return list(map(_EMPTY_IS_NULL.get, texts, texts)) if "" in texts else list(texts)
    if "" in texts:
        return None
    try:
        if column_type in INTEGER_TYPES:
            if max(map(len, texts)) > _LONGEST_INTEGER_TEXT:
                return None
            numbers: list[Any] = list(map(int, texts))
            low, high = _RANGES[column_type]
            return numbers if low <= min(numbers) and max(numbers) <= high else None
        if column_type == "DOUBLE":
            numbers = list(map(float, texts))
            return numbers if all(map(math.isfinite, numbers)) else None
        if column_type == "TIMESTAMP":
            return _parse_utc_stamps(texts)
    except (ValueError, TypeError):  # TypeError: a moment without zone (parse_text's UTC)
        return None
    return None


def _parse_utc_stamps(texts: tuple[str, ...]) -> list[int] | None:
    """`parse_timestamp` of texts that each end in `Z` with no space around (None when one
    does not): the same candidate (`Z` as `+00:00`), moment and microseconds, in C calls."""
    if tuple(map(str.strip, texts)) != texts or not all(map(str.endswith, texts, repeat("Z"))):
        return None
    candidates = map(add, map(itemgetter(slice(None, -1)), texts), repeat("+00:00"))
    moments = map(datetime.fromisoformat, candidates)  # ValueError: to the caller
    micros = list(map(floordiv, map(sub, moments, repeat(_EPOCH)), repeat(_MICRO)))
    return micros if TIMESTAMP_MIN <= min(micros) and max(micros) <= TIMESTAMP_MAX else None


def to_json(value: Any, column_type: str) -> object:
    """A value as it appears in a JSON answer (DESIGN.md section 3)."""
    if value is None:
        return None
    if column_type == "TIMESTAMP":
        return format_timestamp(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def to_text(value: Any, column_type: str) -> str:
    """A value as plain text (CSV fields, the SQL shell)."""
    if value is None:
        return ""
    if column_type == "TIMESTAMP":
        return format_timestamp(value)
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

"""Scalar SQL functions: length, lower, upper, coalesce, nullif, greatest, least, abs,
round, now (and CURRENT_TIMESTAMP, LOCALTIMESTAMP, transaction_timestamp), clock_timestamp,
date_trunc; CAST.

Each builder takes the function's name, its compiled arguments and the scope, checks
arity and types, and returns the compiled call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from refimpl.engine.query.compiled import (
    Compiled,
    Scope,
    as_timestamp_constant,
    common_type,
    comparable,
    is_numeric,
    timestamps_of_text,
)
from refimpl.engine.storage import values
from refimpl.errors import InvalidValue, SqlError, TypeMismatch

TRUNC_UNITS = ("second", "minute", "hour", "day", "week", "month", "year")
# round(x, n) takes n within the exponents a DOUBLE has: 10.0 ** n beyond them is inf or 0.
ROUND_DIGITS = 308


def range_checked(operation: Callable[..., Any], type_: str, what: str) -> Callable[..., Any]:
    """`operation`, its result checked against the range of `type_` (InvalidValue past it)."""
    if type_ not in (*values.NUMERIC_TYPES, "TIMESTAMP"):
        return operation
    check = values.in_range

    def checked(*args: Any) -> Any:
        return check(operation(*args), type_, what)

    return checked


def cast_value(value: Any, source: str, target: str) -> Any:
    """CAST semantics; InvalidValue when the value cannot become the target type."""
    if value is None:
        return None
    if target in values.TEXT_TYPES:
        return values.to_text(value, source)
    if target in values.INTEGER_TYPES:
        if isinstance(value, str):
            value = _number_text(value, int, target)
        elif isinstance(value, float):
            value = int(value)  # a DOUBLE is finite
        if target == "OID" and values.INT_MIN <= value < 0:
            value += values.OID_MAX + 1  # PostgreSQL's `(-1)::oid`: an int4's bits, unsigned
        return values.in_range(int(value), target, "CAST")
    if target == "DOUBLE":
        if isinstance(value, str):
            value = _number_text(value, float, target)
        return values.as_double(value, "CAST")
    if target == "BOOLEAN":
        if isinstance(value, str):
            return values.parse_text(value, "BOOLEAN", "CAST")
        return bool(value)
    if target == "TIMESTAMP":
        if isinstance(value, str):
            return values.parse_timestamp(value)
        return values.in_range(int(value), "TIMESTAMP", "CAST")
    raise TypeMismatch(f"cannot cast to {target}")


def _number_text(text: str, kind: Callable[[str], Any], target: str) -> Any:
    # Text longer than any number a type holds is refused before int() reads it: int() of
    # a long digit string costs time quadratic in its length.
    stripped = text.strip()
    try:
        if len(stripped) > _LONGEST_NUMBER_TEXT:
            raise ValueError(stripped)
        return kind(stripped)
    except ValueError:
        raise InvalidValue(f"cannot cast {values.shown(text)} to {target}") from None


# Digits enough for any BIGINT and for a DOUBLE written with all its significant digits.
_LONGEST_NUMBER_TEXT = 400


def _arity(name: str, args: list[Compiled], *counts: int) -> None:
    if len(args) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise SqlError(f"{name}() takes {wanted} argument(s), not {len(args)}")


def _text_function(transform: Callable[[str], Any], result: str) -> Callable[..., Compiled]:
    def build(name: str, args: list[Compiled], scope: Scope) -> Compiled:
        _arity(name, args, 1)
        if args[0].type not in (*values.TEXT_TYPES, "NULL"):
            raise TypeMismatch(f"{name}() needs text, not {args[0].type}")
        fn = args[0].fn
        return Compiled(
            lambda row: None if (v := fn(row)) is None else transform(v), result, args[0].constant
        )

    return build


def _coalesce(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    if not args:
        raise SqlError("coalesce() needs at least one argument")
    args = timestamps_of_text(args)  # `coalesce(ts, '2026-01-01')` is a TIMESTAMP
    result_type = common_type([a.type for a in args], "coalesce()")
    fns = [a.fn for a in args]

    def first_not_null(row: Sequence[Any]) -> Any:
        for fn in fns:
            value = fn(row)
            if value is not None:
                return value
        return None

    return Compiled(first_not_null, result_type)


def _nullif(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    """nullif(a, b): NULL when a = b, else a (so NULL when a is NULL)."""
    _arity(name, args, 2)
    first, second = comparable(args[0], args[1], "nullif()")
    result_type = first.type if first.type != "NULL" else second.type
    ffn, sfn = first.fn, second.fn

    def null_if_equal(row: Sequence[Any]) -> Any:
        value = ffn(row)
        if value is None:
            return None
        other = sfn(row)
        return None if other is not None and other == value else value

    return Compiled(null_if_equal, result_type, first.constant and second.constant)


def _untyped(compiled: Compiled) -> bool:
    """NULL or a text constant: PostgreSQL's `unknown`, which takes the others' type."""
    return compiled.type == "NULL" or compiled.constant and compiled.type in values.TEXT_TYPES


def _extreme(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    """greatest(a, ...) and least(a, ...): the largest or smallest argument that is not
    NULL (NULL when all are), of their common type, as PostgreSQL's; a text constant next
    to a TIMESTAMP or a number is read as one, as a comparison reads it."""
    if not args:
        raise SqlError(f"{name}() needs at least one argument")
    # The first argument that says its type: the one the others' constants are read as.
    anchor = next((a for a in args if not _untyped(a)), args[0])
    args = [comparable(a, anchor, f"{name}()")[0] for a in args]
    result_type = common_type([a.type for a in args], f"{name}()")
    if result_type.endswith("[]") or result_type == "BLOB":
        raise TypeMismatch(
            f"{name}() compares numbers, text, timestamps or booleans, not {result_type}"
        )
    fns = [a.fn for a in args]
    pick = max if name == "greatest" else min
    widen = float if result_type == "DOUBLE" else None  # an INT among DOUBLEs is one

    def extreme(row: Sequence[Any]) -> Any:
        present = [v for fn in fns if (v := fn(row)) is not None]
        if not present:
            return None
        value = pick(present)
        return widen(value) if widen is not None else value

    return Compiled(extreme, result_type, all(a.constant for a in args))


def _abs(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 1)
    if not is_numeric(args[0].type):
        raise TypeMismatch(f"abs() needs a number, not {args[0].type}")
    fn = args[0].fn
    absolute = range_checked(abs, args[0].type, "abs()")  # abs(-2147483648) is not an INT
    return Compiled(lambda row: None if (v := fn(row)) is None else absolute(v), args[0].type)


def _round(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 1, 2)
    if not is_numeric(args[0].type):
        raise TypeMismatch(f"round() needs a number, not {args[0].type}")
    if len(args) == 2 and args[1].type not in (*values.INTEGER_TYPES, "NULL"):
        raise TypeMismatch(f"round() takes a whole number of decimal places, not {args[1].type}")
    fn = args[0].fn
    digits_fn = args[1].fn if len(args) == 2 else (lambda row: 0)

    def round_half_away(row: Sequence[Any]) -> Any:
        value, digits = fn(row), digits_fn(row)
        if value is None or digits is None:
            return None
        if not -ROUND_DIGITS <= digits <= ROUND_DIGITS:
            raise InvalidValue(
                f"round() takes from {-ROUND_DIGITS} to {ROUND_DIGITS} decimal places, not {digits}"
            )
        if isinstance(value, int):
            return value
        factor = 10.0**digits
        scaled = abs(value) * factor
        if not math.isfinite(scaled) or scaled >= 2.0**53:
            return value  # no digit at that place to round away
        return math.copysign(math.floor(scaled + 0.5) / factor, value)

    return Compiled(round_half_away, args[0].type)


def _now(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 0)
    moment = scope.now
    return Compiled(lambda row: moment, "TIMESTAMP", constant=True)


def _clock_timestamp(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    """clock_timestamp(): the clock's moment when it is called, each call (each row) its own,
    as PostgreSQL's; never a constant."""
    _arity(name, args, 0)
    clock = time.time_ns
    return Compiled(lambda row: clock() // 1000, "TIMESTAMP")


def _clock(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    """CURRENT_TIMESTAMP and LOCALTIMESTAMP (the session's time zone is UTC: the same
    moment), now()'s, rounded to their precision's fractional digits as PostgreSQL rounds."""
    _arity(name, args, 0, 1)
    moment = scope.now
    if args:
        digits = args[0].fn(()) if args[0].constant else None
        # The grammar writes a precision as a whole number of digits, six at most.
        if type(digits) is not int or not 0 <= digits <= 6:
            raise SqlError(f"the precision of {name.upper()} is a whole number from 0 to 6")
        step = 10 ** (6 - digits)
        moment = (moment + step // 2) // step * step
    return Compiled(lambda row: moment, "TIMESTAMP", constant=True)


def truncate_timestamp(unit: str, micros: int) -> int:
    """date_trunc: the start of the unit holding the time (weeks start on Monday)."""
    if unit == "second":
        return micros - micros % 1_000_000
    if unit == "minute":
        return micros - micros % 60_000_000
    if unit == "hour":
        return micros - micros % 3_600_000_000
    day_start = micros - micros % 86_400_000_000
    if unit == "day":
        return day_start
    moment = values.timestamp_to_datetime(day_start)
    if unit == "week":
        moment -= timedelta(days=moment.weekday())
    elif unit == "month":
        moment = moment.replace(day=1)
    else:
        moment = moment.replace(month=1, day=1)
    return values.datetime_to_timestamp(moment)


def _date_trunc(name: str, args: list[Compiled], scope: Scope) -> Compiled:
    _arity(name, args, 2)
    unit_arg, time_arg = args
    if time_arg.type in values.TEXT_TYPES and time_arg.constant:
        time_arg = as_timestamp_constant(time_arg)
    if time_arg.type not in ("TIMESTAMP", "NULL"):
        raise TypeMismatch(f"date_trunc() truncates a TIMESTAMP, not {time_arg.type}")
    if not unit_arg.constant:
        raise SqlError("date_trunc() takes its unit as a constant such as 'minute'")
    unit = unit_arg.fn(())
    if not isinstance(unit, str) or unit.lower() not in TRUNC_UNITS:
        raise InvalidValue(
            f"date_trunc() unit {unit!r} is unknown; use one of {', '.join(TRUNC_UNITS)}"
        )
    unit = unit.lower()
    fn = time_arg.fn
    return Compiled(
        lambda row: None if (v := fn(row)) is None else truncate_timestamp(unit, v), "TIMESTAMP"
    )


FUNCTIONS: dict[str, Callable[[str, list[Compiled], Scope], Compiled]] = {
    "length": _text_function(len, "INT"),
    "lower": _text_function(str.lower, "STRING"),
    "upper": _text_function(str.upper, "STRING"),
    "coalesce": _coalesce,
    "nullif": _nullif,
    "greatest": _extreme,
    "least": _extreme,
    "abs": _abs,
    "round": _round,
    "now": _now,
    "transaction_timestamp": _now,
    "clock_timestamp": _clock_timestamp,
    "current_timestamp": _clock,
    "localtimestamp": _clock,
    "date_trunc": _date_trunc,
}
# The functions of the clock: of the transaction's start (`Scope.now`, the statement's
# context's `transaction_time`), of the statement's (statement_timestamp(), a function of the
# session) and of the call's. A plan calling one is made again for each run, and its answer
# is never kept.
CLOCK_FUNCTIONS = frozenset(
    {
        "now",
        "current_timestamp",
        "localtimestamp",
        "transaction_timestamp",
        "statement_timestamp",
        "clock_timestamp",
    }
)

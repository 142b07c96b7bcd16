"""InfluxDB line protocol, as QuestDB accepts it over HTTP, parsed into typed points.

    trades,symbol=NABIL price=1510.5,qty=10i 1700000000000000000

A line is a table name, optional `,tag=value` pairs, a space, `field=value` pairs and an
optional timestamp (nanoseconds by default). Tags are SYMBOL; a field is a DOUBLE (`1.5`,
`1`), a BIGINT (`10i`), a STRING (`"text"`) or a BOOLEAN (`t`, `f`, `true`, `false`).
A backslash escapes the next character in names and unquoted values; `\\"` and `\\\\` inside a
quoted string. Only the wire format is handled here: which tables and columns exist, and the
writing, are the route's business.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from refimpl.engine.storage import values as stored
from refimpl.errors import BadRequest, LineError

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIMESTAMP_COLUMN = "timestamp"
_BOOLEANS = {
    "t": True,
    "T": True,
    "true": True,
    "True": True,
    "TRUE": True,
    "f": False,
    "F": False,
    "false": False,
    "False": False,
    "FALSE": False,
}
_INTEGER = re.compile(r"^-?[0-9]+$")
BIGINT_RANGE = (stored.BIGINT_MIN, stored.BIGINT_MAX)
# More digits than any BIGINT or nanosecond timestamp has: longer integers are refused before
# int() reads them (its cost grows with the square of the length).
_LONGEST_INTEGER = 20
# Multipliers from a timestamp in the `precision` unit to microseconds (n is divided).
PRECISIONS = {"n": None, "ns": None, "u": 1, "us": 1, "ms": 1000, "s": 1_000_000}


# A field's value as read: BIGINT, DOUBLE, STRING or BOOLEAN.
FieldValue = int | float | str | bool


@dataclass(slots=True)
class Point:
    """One line: `values` maps column name to (type, value); `line` counts from 1."""

    line: int
    table: str
    values: dict[str, tuple[str, FieldValue]] = field(default_factory=dict)
    timestamp: int | None = None  # microseconds since the epoch, None for "now"
    columns: dict[str, int] = field(default_factory=dict)  # name -> column of the line


class _Cursor:
    def __init__(self, text: str, line: int) -> None:
        self.text = text
        self.pos = 0
        self.line = line

    def error(self, message: str, pos: int | None = None) -> LineError:
        return LineError(self.line, (self.pos if pos is None else pos) + 1, message)

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def read_until(self, stops: str) -> str:
        """Text up to the first unescaped character of `stops` (or the end), unescaped."""
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\" and self.pos + 1 < len(text):
                out.append(text[self.pos + 1])
                self.pos += 2
                continue
            if char in stops:
                break
            out.append(char)
            self.pos += 1
        return "".join(out)

    def read_quoted(self) -> str:
        start = self.pos
        self.pos += 1  # the opening quote
        out: list[str] = []
        text = self.text
        while self.pos < len(text):
            char = text[self.pos]
            if char == "\\" and self.pos + 1 < len(text) and text[self.pos + 1] in '"\\':
                out.append(text[self.pos + 1])
                self.pos += 2
                continue
            if char == '"':
                self.pos += 1
                return "".join(out)
            out.append(char)
            self.pos += 1
        raise self.error("a quoted string is not closed", start)


def _name(cursor: _Cursor, start: int, name: str, what: str) -> str:
    if not NAME.match(name):
        raise cursor.error(
            f"{name!r} is not a valid {what} name; use letters, digits and _ (not first)", start
        )
    return name


def _field_value(cursor: _Cursor, start: int, raw: str) -> tuple[str, FieldValue]:
    if raw in _BOOLEANS:
        return "BOOLEAN", _BOOLEANS[raw]
    if raw[-1:] in ("i", "u") and _INTEGER.match(raw[:-1]):
        digits = raw[:-1].lstrip("-").lstrip("0")
        value = int(raw[:-1]) if len(digits) <= _LONGEST_INTEGER else None
        if (
            value is None
            or not BIGINT_RANGE[0] <= value <= BIGINT_RANGE[1]
            or (raw[-1] == "u" and value < 0)
        ):
            raise cursor.error(
                f"the integer {stored.shown(raw)} is out of range for BIGINT"
                f" ({BIGINT_RANGE[0]} to {BIGINT_RANGE[1]})",
                start,
            )
        return "BIGINT", value
    try:
        number = float(raw)
    except ValueError:
        raise cursor.error(
            f'bad field value {raw!r}; write a number, 10i, "text", true or false', start
        ) from None
    if math.isnan(number) or math.isinf(number) or raw.strip() != raw:
        raise cursor.error(f"bad field value {raw!r}; write a finite number", start)
    return "DOUBLE", number


def _set(
    cursor: _Cursor, point: Point, name: str, start: int, typed: tuple[str, FieldValue]
) -> None:
    key = name.casefold()
    if key == TIMESTAMP_COLUMN:
        raise cursor.error(f"'{name}' is the timestamp column's name; use another", start)
    if key in {k.casefold() for k in point.values}:
        raise cursor.error(f"'{name}' appears twice in the line", start)
    point.values[name] = typed
    point.columns[name] = start + 1


def _key(cursor: _Cursor, what: str) -> tuple[int, str]:
    """Where a tag's or field's `key=` starts, and the key; the cursor after its `=`."""
    start = cursor.pos
    key = _name(cursor, start, cursor.read_until("=, "), what)
    if cursor.peek() != "=":
        raise cursor.error(f"{what} '{key}' has no '=value'")
    cursor.pos += 1
    return start, key


def _bare_value(cursor: _Cursor, what: str) -> str:
    """An unquoted value, up to a comma or space; an empty one is an error naming `what`."""
    start = cursor.pos
    value = cursor.read_until(", ")
    if value == "":
        raise cursor.error(f"{what} has an empty value", start)
    return value


def parse_line(text: str, number: int, multiplier: int | None) -> Point:
    cursor = _Cursor(text, number)
    table = _name(cursor, 0, cursor.read_until(", "), "table")
    point = Point(number, table)
    while cursor.peek() == ",":  # tags
        cursor.pos += 1
        start, key = _key(cursor, "tag")
        value = _bare_value(cursor, f"tag '{key}'")
        _set(cursor, point, key, start, ("SYMBOL", value))
    if cursor.peek() != " ":
        raise cursor.error("expected a space and then fields, as in `t,tag=a field=1.5`")
    while cursor.peek() == " ":
        cursor.pos += 1
    fields = 0
    while True:  # fields
        start, key = _key(cursor, "field")
        value_start = cursor.pos
        if cursor.peek() == '"':
            typed: tuple[str, FieldValue] = ("STRING", cursor.read_quoted())
        else:
            raw = _bare_value(cursor, f"field '{key}'")
            typed = _field_value(cursor, value_start, raw)
        _set(cursor, point, key, start, typed)
        fields += 1
        if cursor.peek() == ",":
            cursor.pos += 1
            continue
        break
    rest_start = cursor.pos
    rest = text[rest_start:].strip()
    if rest:
        if not _INTEGER.match(rest):
            raise cursor.error(
                f"bad timestamp {stored.shown(rest)}; write a whole number in the precision's unit",
                rest_start + 1,
            )
        micros = None
        if len(rest.lstrip("-").lstrip("0")) <= _LONGEST_INTEGER:
            stamp = int(rest)
            micros = stamp // 1000 if multiplier is None else stamp * multiplier
        # The TIMESTAMP range, whatever the precision: a moment a reader could not show is
        # never stored.
        if micros is None or not stored.TIMESTAMP_MIN <= micros <= stored.TIMESTAMP_MAX:
            raise cursor.error(
                f"timestamp {stored.shown(rest)} is out of range: a TIMESTAMP is from"
                " 0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z; check the precision"
                " parameter (n, u, ms or s)",
                rest_start + 1,
            )
        point.timestamp = micros
    return point


def parse_lines(body: str, precision: str = "n") -> list[Point]:
    """Every point of a body; blank lines and `#` comments are skipped."""
    if precision not in PRECISIONS:
        raise BadRequest(f"unknown precision '{precision}'; use n, u, ms or s")
    multiplier = PRECISIONS[precision]
    points = []
    for number, line in enumerate(body.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        points.append(parse_line(line, number, multiplier))
    return points

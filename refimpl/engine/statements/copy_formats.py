"""COPY's two text formats (PostgreSQL's `text` and `csv`): options, rows in, rows out
(the `binary` format's rows are `copy_binary`'s).

`CopyFormat.of` checks a statement's options; `RowReader` turns a byte stream into typed rows
in a table's column order, stopping at the first bad field with `CopyError` naming its line
and column; `encode_rows` writes rows as the format's text, in chunks.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.errors import CopyError, InvalidValue, SqlError
from refimpl.sql import ast

# Data read and decoded at a time: its lines are split off in one C call, which no other
# thread can interrupt (256 KB: 0.2 to 0.6 ms; 32 KB: about 25 us, at the same CPU a row).
READ_BYTES = 32 * 1024
_OPTIONS = ("format", "header", "delimiter", "null", "quote", "escape")
_TEXT_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_TEXT_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", re.DOTALL)
_STRING_TYPES = frozenset({"STRING", "SYMBOL"})


@dataclass(frozen=True, slots=True)
class CopyFormat:
    """A COPY's format and its options, with PostgreSQL's defaults filled in."""

    csv: bool = False
    header: bool = False
    header_match: bool = False  # HEADER MATCH: the header's names must be the columns
    delimiter: str = "\t"
    null: str = "\\N"
    quote: str = '"'
    escape: str = '"'
    binary: bool = False  # PostgreSQL's binary format: no other option applies

    @classmethod
    def of(cls, options: Sequence[ast.CopyOption]) -> CopyFormat:
        """The format of a statement's options; CopyError for an unknown or bad one."""
        given: dict[str, ast.CopyValue] = {}
        for option in options:
            if option.name not in _OPTIONS:
                raise CopyError(
                    f"COPY has no option '{option.name}'; the options are"
                    f" {', '.join(o.upper() for o in _OPTIONS)}"
                )
            if option.name in given:
                raise CopyError(f"COPY option {option.name.upper()} is given twice")
            given[option.name] = option.value
        kind = given.get("format", "text")
        if kind not in ("text", "csv", "binary"):
            raise CopyError(f"COPY FORMAT {kind} is not supported; use text, csv or binary")
        if kind == "binary":
            for name in given.keys() - {"format"}:
                raise CopyError(f"COPY {name.upper()} is not an option of FORMAT binary")
            return cls(binary=True)
        is_csv = kind == "csv"
        header, match = _header(given.get("header", False))
        delimiter = _char(given, "delimiter", "," if is_csv else "\t")
        null = _text(given, "null", "" if is_csv else "\\N")
        if not is_csv and ("quote" in given or "escape" in given):
            raise CopyError("COPY QUOTE and ESCAPE are options of FORMAT csv only")
        quote = _char(given, "quote", '"')
        escape = _char(given, "escape", quote)
        if is_csv and delimiter == quote:
            raise CopyError("COPY DELIMITER and QUOTE must differ")
        if delimiter in null or "\n" in null or "\r" in null:
            raise CopyError("COPY NULL must not hold the delimiter or a line end")
        return cls(is_csv, header, match, delimiter, null, quote, escape)


def _header(value: ast.CopyValue) -> tuple[bool, bool]:
    if value is None or value is True or value in ("true", "on", "1"):
        return True, False
    if value is False or value in ("false", "off", "0"):
        return False, False
    if value == "match":
        return True, True
    raise CopyError(f"COPY HEADER takes true, false or match, not '{value}'")


def _text(given: dict[str, ast.CopyValue], name: str, default: str) -> str:
    value = given.get(name, default)
    if not isinstance(value, str):
        raise CopyError(f"COPY {name.upper()} takes a quoted string, like {name.upper()} ','")
    return value


def _char(given: dict[str, ast.CopyValue], name: str, default: str) -> str:
    value = _text(given, name, default)
    if len(value) != 1 or value in "\r\n\\" and name == "delimiter":
        raise CopyError(
            f"COPY {name.upper()} must be one character (not a line end or"
            f" backslash), not '{value}'"
        )
    return value


class RowReader:
    """The rows of COPY data for `columns` (the statement's, in order) of a table.

    `rows()` yields tuples of stored values in the table's column order (NULL where the
    statement names no column), converted by `values.parse_text`.
    """

    def __init__(
        self,
        data: IO[bytes],
        fmt: CopyFormat,
        table: str,
        table_columns: Sequence[Column],
        columns: Sequence[str],
    ) -> None:
        self._data = data
        self._format = fmt
        self._table = table
        by_name = {c.name.casefold(): (i, c) for i, c in enumerate(table_columns)}
        self._width = len(table_columns)
        self._placed: list[tuple[int, Column]] = []
        for name in columns:
            found = by_name.get(name.casefold())
            if found is None:
                raise CopyError(f"table '{table}' has no column '{name}'")
            if found in self._placed:
                raise CopyError(f"column '{found[1].name}' is named twice in the COPY")
            self._placed.append(found)
        # What converting each field takes: its place, its type (None: text as it is), name.
        self._kinds = [
            (at, None if c.type in _STRING_TYPES else c.type, c.name) for at, c in self._placed
        ]

    @property
    def placed(self) -> list[tuple[int, Column]]:
        """The copied columns in the data's order, each with its place in the table's row."""
        return self._placed

    def rows(self) -> Iterator[tuple]:
        fmt = self._format
        records = self._csv_records() if fmt.csv else self._text_records()
        if fmt.header:
            header = next(records, None)
            if header is not None:
                self._check_header(*header)
        row = self._row
        for line, fields in records:
            yield row(line, fields)

    def _check_header(self, line: int, fields: Sequence[str | None]) -> None:
        if not self._format.header_match:
            return
        names = [c.name for _, c in self._placed]
        if [(f or "").casefold() for f in fields] != [n.casefold() for n in names]:
            raise CopyError(
                f"COPY {self._table}, line {line}: the header names"
                f" {', '.join(f or '' for f in fields)} where the columns are"
                f" {', '.join(names)} (HEADER MATCH)"
            )

    def _row(self, line: int, fields: Sequence[str | None]) -> tuple[object, ...]:
        placed = self._placed
        if len(fields) != len(placed):
            what = "missing data" if len(fields) < len(placed) else "extra data"
            raise CopyError(
                f"COPY {self._table}, line {line}: {what}: {len(fields)} field(s)"
                f" where {len(placed)} column(s) are copied"
            )
        row: list[object] = [None] * self._width
        parse = values.parse_text
        try:
            for (at, kind, name), field in zip(self._kinds, fields, strict=True):
                if field is None:
                    continue
                if kind is None:
                    row[at] = field  # STRING, SYMBOL
                elif field:
                    row[at] = parse(field, kind, name)
                else:
                    raise InvalidValue(f"'' is not a valid {kind} for column '{name}'")
        except SqlError:
            raise self._bad_field(line, fields) from None
        return tuple(row)

    def _bad_field(self, line: int, fields: Sequence[str | None]) -> CopyError:
        """The error of a row that did not convert, naming its first bad field (rare: the
        fast path above does not count fields)."""
        pairs = zip(self._placed, fields, strict=True)
        for number, ((_, column), field) in enumerate(pairs, start=1):
            if field is None or column.type in _STRING_TYPES:
                continue
            try:
                if not field:
                    raise InvalidValue(
                        f"'' is not a valid {column.type} for column '{column.name}'"
                    )
                values.parse_text(field, column.type, column.name)
            except SqlError as exc:
                return CopyError(
                    f"COPY {self._table}, line {line}, column {number}"
                    f" ({column.name}): {exc.message}"
                )
        raise AssertionError("a row that failed to convert has a bad field")

    # -- the two formats -------------------------------------------------------------------

    def _text_records(self) -> Iterator[tuple[int, Sequence[str | None]]]:
        fmt = self._format
        delimiter, null = fmt.delimiter, fmt.null
        # A row costs its line and its fields: no other string or list is made for a line
        # without a backslash or NULL (the most common), since COPY parsing holds the
        # interpreter lock that every other request waits for.
        for number, line in enumerate(_lines(self._data, ends=False), start=1):
            if line.endswith("\r"):
                line = line[:-1]
            if line == "\\.":
                return  # PostgreSQL's end-of-data marker
            if "\\" not in line:
                fields = line.split(delimiter)
                yield (
                    number,
                    [None if f == null else f for f in fields] if null in fields else fields,
                )
                continue
            fields = _split_escaped(line, delimiter)
            yield number, [None if f == null else _unescape(f) for f in fields]

    def _csv_records(self) -> Iterator[tuple[int, Sequence[str | None]]]:
        fmt = self._format
        raw_lines: list[str] = []

        def tracked() -> Iterator[str]:
            for text in _lines(self._data):
                raw_lines.append(text)
                yield text

        reader = csv.reader(
            tracked(),
            delimiter=fmt.delimiter,
            quotechar=fmt.quote,
            escapechar=None if fmt.escape == fmt.quote else fmt.escape,
            doublequote=fmt.escape == fmt.quote,
            strict=True,
        )
        null = fmt.null
        line = 1
        while True:
            try:
                fields = next(reader, None)
            except csv.Error as exc:
                raise CopyError(f"COPY {self._table}, line {reader.line_num}: {exc}") from None
            if fields is None:
                return
            raw = "".join(raw_lines)
            raw_lines.clear()
            start, line = line, reader.line_num + 1
            if not fields:
                continue  # a blank line
            if null not in fields:
                yield start, fields  # no field is NULL
            elif fmt.quote in raw:
                # A quoted field is never NULL: only the raw text tells "" from nothing.
                yield start, _exact_csv(raw, fmt)
            else:
                yield start, [None if f == null else f for f in fields]


def _lines(data: IO[bytes], ends: bool = True) -> Iterator[str]:
    """The data's lines as text (each with its "\\n" when `ends`), decoded as read; CopyError
    at bad UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    # The start of a line that has not ended yet, a block at a time: joined once, when it
    # ends, so that a line longer than many blocks costs its length, not its length times
    # its blocks (and no C call is longer than a block's split, or the line's join).
    pending: list[str] = []
    offset = 0  # bytes read before this block
    while block := data.read(READ_BYTES):
        carried = len(decoder.getstate()[0])  # bytes of a character cut by the last block
        try:
            text = decoder.decode(block)
        except UnicodeDecodeError as exc:
            where = offset - carried + exc.start + 1
            raise CopyError(f"the COPY data is not valid UTF-8 (byte {where})") from None
        offset += len(block)
        parts = text.split("\n")
        if len(parts) == 1:
            pending.append(text)
            continue
        if pending:
            parts[0] = "".join(pending) + parts[0]
        pending = [parts.pop()]
        if ends:
            for part in parts:
                yield part + "\n"
        else:
            yield from parts
    try:
        pending.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        raise CopyError("the COPY data is not valid UTF-8 (it ends inside a character)") from None
    last = "".join(pending)
    if last:
        yield last


def _split_escaped(line: str, delimiter: str) -> list[str]:
    """A text-format line cut at delimiters that no backslash escapes (fields stay escaped)."""
    fields, start, i = [], 0, 0
    while i < len(line):
        char = line[i]
        if char == "\\":
            i += 2
            continue
        if char == delimiter:
            fields.append(line[start:i])
            start = i + 1
        i += 1
    fields.append(line[start:])
    return fields


def _unescape(field: str) -> str:
    if "\\" not in field:
        return field
    return _TEXT_ESCAPE.sub(_escape, field)


def _escape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] == "x" and len(code) > 1:
        return chr(int(code[1:], 16))
    if code[0].isdigit():
        return chr(int(code, 8) & 0xFF)
    return _TEXT_ESCAPES.get(code, code)


def _exact_csv(raw: str, fmt: CopyFormat) -> list[str | None]:
    """One CSV record (its raw text, line ends included) split exactly: a quoted field is
    text even when empty or equal to NULL, an unquoted one equal to NULL is NULL."""
    text = raw[:-1] if raw.endswith("\n") else raw
    if text.endswith("\r"):
        text = text[:-1]
    fields: list[str | None] = []
    i, n = 0, len(text)
    while True:
        quoted, parts = False, []
        while i < n and text[i] != fmt.delimiter:
            char = text[i]
            if char == fmt.quote:
                quoted = True
                i += 1
                while i < n:
                    char = text[i]
                    if char == fmt.escape and i + 1 < n and text[i + 1] in (fmt.quote, fmt.escape):
                        parts.append(text[i + 1])
                        i += 2
                    elif char == fmt.quote:
                        i += 1
                        break
                    else:
                        parts.append(char)
                        i += 1
            else:
                parts.append(char)
                i += 1
        value = "".join(parts)
        fields.append(value if quoted or value != fmt.null else None)
        if i >= n:
            return fields
        i += 1  # the delimiter


# -- rows out ------------------------------------------------------------------------------


def encode_rows(
    columns: Sequence[Column],
    rows: Iterable[Sequence[object]],
    fmt: CopyFormat,
    rows_per_chunk: int = 1000,
) -> Iterator[bytes]:
    """The rows as COPY TO writes them, `rows_per_chunk` rows a chunk (never all at once)."""
    kinds = [c.type for c in columns]
    buffer = io.StringIO()
    delimiter, null = fmt.delimiter, fmt.null
    field = _csv_field(fmt) if fmt.csv else _text_field(delimiter)
    if fmt.header:
        buffer.write(delimiter.join(field(c.name) for c in columns) + "\n")

    def write(row: Sequence[object]) -> None:
        buffer.write(
            delimiter.join(
                null if v is None else field(values.to_text(v, k))
                for k, v in zip(kinds, row, strict=True)
            )
            + "\n"
        )

    for number, row in enumerate(rows, start=1):
        write(row)
        if number % rows_per_chunk == 0:
            yield buffer.getvalue().encode("utf-8")
            buffer.seek(0)
            buffer.truncate()
    tail = buffer.getvalue()
    if tail:
        yield tail.encode("utf-8")


def _text_field(delimiter: str) -> Callable[[str], str]:
    """How the text format writes a value: backslash escapes for what would cut it."""
    specials = ("\\", "\n", "\r", "\t", delimiter)
    named = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}

    def field(text: str) -> str:
        if not any(special in text for special in specials):
            return text
        return "".join(named.get(c) or ("\\" + c if c == delimiter else c) for c in text)

    return field


def _csv_field(fmt: CopyFormat) -> Callable[[str], str]:
    """How CSV writes a value: quoted when empty (apart from NULL), equal to NULL, or holding
    the delimiter, the quote, the escape or a line end."""
    quote, escape = fmt.quote, fmt.escape
    specials = (fmt.delimiter, quote, escape, "\n", "\r")

    def field(text: str) -> str:
        if text and text != fmt.null and not any(special in text for special in specials):
            return text
        inner = text.replace(escape, escape + escape) if escape != quote else text
        return quote + inner.replace(quote, escape + quote) + quote

    return field

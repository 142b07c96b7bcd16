"""CSV bodies of POST /imp as batches of typed rows, or a BadRequest naming the line and column.

Only the wire format lives here: the header row names the columns, each field becomes a value
of its column's type (an empty field is NULL, `values.parse_text` converts and range-checks),
and the first bad field stops the whole import. The body is read line by line and the rows
come in batches, each row in the table's column order (NULL for a column the header does not
name), so the engine stores them as they are: an import costs memory for its rows, once,
never for a copy of the file.
"""

from __future__ import annotations

import codecs
import csv
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice, repeat
from operator import add
from typing import IO

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.errors import BadRequest, SqlError

BATCH_ROWS = 5000  # rows converted and inserted at a time
# Rows read by one C call, and whose columns are converted by one C call each
# (`values.parse_texts`), where converting field by field costs Python frames a field (about
# 4 us a row of four fields, against 1.6). Each such call holds the interpreter lock for all
# of them: 128 rows' reading takes 0.05 ms (0.19 at the 99th percentile, on a busy machine;
# 256 rows' 0.32), under the switch interval an import runs with (`bulk.quick_switches`).
CONVERT_ROWS = 128
# Body read and decoded at a time. Its lines are split off in one C call, which no other
# thread can interrupt: 256 KB took 0.2 to 0.6 ms, longer than the switch interval an
# import runs with (`bulk.quick_switches`); 32 KB takes about 25 us, at the same CPU a row.
READ_BYTES = 32 * 1024


class CsvImport:
    """One CSV body: `columns` from its header line, then `batches()` of typed rows."""

    def __init__(self, body: IO[bytes], table_columns: Sequence[Column], table: str) -> None:
        self._reader = csv.reader(_utf8_lines(body), strict=True)
        header = self._next_fields()
        if not header or header == [""]:
            raise BadRequest("the CSV body is empty; its first line must name the columns")
        by_name = {c.name.casefold(): c for c in table_columns}
        position = {c.name.casefold(): index for index, c in enumerate(table_columns)}
        self._table_columns = [c.name for c in table_columns]
        self._columns: list[Column] = []
        self._positions: list[int] = []  # where each header column stands in a row
        seen: set[str] = set()
        for number, name in enumerate(header, start=1):
            column = by_name.get(name.strip().casefold())
            if column is None:
                raise BadRequest(
                    f"CSV line 1, column {number}: table '{table}' has no column '{name.strip()}'"
                )
            if column.name.casefold() in seen:
                raise BadRequest(
                    f"CSV line 1, column {number}: column '{column.name}' is named twice"
                )
            seen.add(column.name.casefold())
            self._columns.append(column)
            self._positions.append(position[column.name.casefold()])

    @property
    def columns(self) -> list[str]:
        """The names of the values of each row: all the table's columns, in its order."""
        return self._table_columns

    def batches(self, size: int = BATCH_ROWS) -> Iterator[list[tuple]]:
        """The typed rows, `size` or a few more at a time; BadRequest at the first bad line."""
        kinds = [column.type for column in self._columns]
        # The header names every column in the table's order (most files): a chunk of rows
        # with a field for each column is converted a column by a few C calls (`_columns_of`).
        in_order = self._positions == list(range(len(self._table_columns)))
        width = len(kinds)
        reader = self._reader
        batch: list[tuple] = []
        while True:
            before = reader.line_num  # the line before the chunk's first
            chunk: list[list[str]] = []
            try:
                # Rows read by C calls alone; those read before a broken line stay read.
                chunk.extend(islice(reader, CONVERT_ROWS))
            except (csv.Error, BadRequest) as exc:  # BadRequest: the body's bad UTF-8
                broken = (
                    BadRequest(f"CSV line {reader.line_num}: {exc}")
                    if isinstance(exc, csv.Error)
                    else exc
                )
                self._typed(chunk, before, kinds, in_order)  # a bad line before it is first
                raise broken from None
            if not chunk:
                break
            typed = None
            if in_order and min(map(len, chunk)) == width == max(map(len, chunk)):
                if width > 1 or [""] not in chunk:  # no blank line (one empty field) either
                    typed = _columns_of(chunk, kinds)
            batch += self._typed(chunk, before, kinds, in_order) if typed is None else typed
            if len(batch) >= size:
                yield batch
                batch = []
        if batch:
            yield batch

    def _typed(
        self, chunk: list[list[str]], before: int, kinds: list[str], in_order: bool
    ) -> list[tuple]:
        """The rows of `chunk` (read after line `before`) typed, as `_convert` makes them,
        blank lines left out; BadRequest at the first bad line, named by the line it ends on
        (the reader's lines: one, and one more for each line end within a quoted field)."""
        names = [column.name for column in self._columns]
        positions = self._positions
        width = len(self._table_columns)
        parse = values.parse_text
        kept: list[list[str]] = []  # in order, not converted yet
        lines: list[int] = []  # the line each of them ended on
        typed: list[tuple] = []
        line = before
        for fields in chunk:
            line += 1 + sum(field.count("\n") for field in fields)
            if not fields or fields == [""]:
                continue  # a blank line, as at the end of many files
            if len(fields) != len(names):
                self._convert(kept, lines, kinds)  # a bad field before it comes first
                raise BadRequest(
                    f"CSV line {line}: {len(fields)} field(s) where the header names {len(names)}"
                )
            if in_order:
                kept.append(fields)
                lines.append(line)
                continue
            row: list[object] = [None] * width
            try:
                for at, field, kind, name in zip(positions, fields, kinds, names, strict=True):
                    row[at] = parse(field, kind, name)
            except SqlError:
                raise self._bad_field(fields, line) from None
            typed.append(tuple(row))
        return typed + self._convert(kept, lines, kinds)

    def _convert(self, rows: list[list[str]], lines: list[int], kinds: list[str]) -> list[tuple]:
        """`rows` (each a field per column, in the table's order) as typed rows: by
        `_columns_of`, or field by field by `parse_text` when a column is not for it (where
        the first bad field is found, named by its line: `lines` holds each row's)."""
        typed = _columns_of(rows, kinds) if rows else []
        if typed is not None:
            return typed
        parse = values.parse_text
        names = [column.name for column in self._columns]
        typed = []
        for fields, line in zip(rows, lines, strict=True):
            try:
                typed.append(tuple(map(parse, fields, kinds, names)))
            except SqlError:
                raise self._bad_field(fields, line) from None
        return typed

    def _bad_field(self, fields: list[str], line: int) -> BadRequest:
        """The error of the row `fields` (ended on `line`) that a conversion refused: its
        first bad field, found by converting them again one by one."""
        for number, (column, field) in enumerate(zip(self._columns, fields, strict=True), start=1):
            try:
                values.parse_text(field, column.type, column.name)
            except SqlError as exc:
                return BadRequest(f"CSV line {line}, column {number}: {exc.message}")
        raise AssertionError("a conversion refused a field, and then none")  # never: pure

    def _next_fields(self) -> list[str] | None:
        try:
            return next(self._reader, None)
        except csv.Error as exc:
            raise BadRequest(f"CSV line {self._reader.line_num}: {exc}") from None


def _columns_of(rows: list[list[str]], kinds: list[str]) -> list[tuple] | None:
    """`rows` (each a field per column, in the table's order) as typed rows, a column by
    `values.parse_texts`; None when one column is not for it."""
    converted = []
    for texts, kind in zip(zip(*rows, strict=True), kinds, strict=True):
        column = values.parse_texts(texts, kind)
        if column is None:
            return None
        converted.append(column)
    return list(zip(*converted, strict=True))


def _utf8_lines(body: IO[bytes]) -> Iterator[str]:
    """The body's lines as text, decoded as they are read; BadRequest at bad UTF-8.

    Read in blocks: a WSGI input stream may have no fast `readline`. A block's lines are
    given by C calls (no Python frame a line), so that the CSV reader reads a chunk of rows
    in C alone (`CsvImport.batches`).
    """
    return chain.from_iterable(_utf8_blocks(body))


def _utf8_blocks(body: IO[bytes]) -> Iterator[Iterable[str]]:
    """The lines of `_utf8_lines`, those of each block together."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0  # bytes read before this block
    pending: list[str] = []  # the start of a line that has not ended yet
    while block := body.read(READ_BYTES):
        carried = len(decoder.getstate()[0])  # bytes of a character cut by the last block
        try:
            text = decoder.decode(block)
        except UnicodeDecodeError as exc:
            where = offset - carried + exc.start + 1
            raise BadRequest(f"the body is not valid UTF-8 (byte {where})") from None
        offset += len(block)
        lines = text.split("\n")
        if len(lines) == 1:
            pending.append(text)
            continue
        lines[0] = "".join(pending) + lines[0]
        pending = [lines.pop()]
        yield map(add, lines, repeat("\n"))
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise BadRequest(
            f"the body is not valid UTF-8 (it ends inside a character, byte {offset})"
        ) from None
    last = "".join(pending)
    if last:
        yield (last,)

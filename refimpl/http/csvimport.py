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
from collections.abc import Iterator, Sequence
from typing import IO

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.errors import BadRequest, SqlError

BATCH_ROWS = 5000  # rows converted and inserted at a time
# Rows whose columns are converted by one C call each (`values.parse_texts`): a few C calls
# over 256 rows hold the interpreter lock up to about 0.1 ms each, under the switch interval
# an import runs with (`bulk.quick_switches`), where converting field by field costs Python
# frames a field (about 4 us a row of four fields, against 1).
CONVERT_ROWS = 256
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
        columns = self._columns
        kinds = [column.type for column in columns]
        names = [column.name for column in columns]
        positions = self._positions
        width = len(self._table_columns)
        # The header names every column in the table's order (most files): rows are
        # converted `CONVERT_ROWS` at a time, a column by a few C calls (`_convert`).
        in_order = positions == list(range(width))
        parse = values.parse_text
        batch: list[tuple] = []
        fields_read: list[list[str]] = []  # in order, not converted yet
        lines: list[int] = []  # the line each of them ended on
        while True:
            try:
                fields = self._next_fields()
                if fields is not None and fields and fields != [""] and len(fields) != len(names):
                    raise BadRequest(
                        f"CSV line {self._reader.line_num}: {len(fields)} field(s) where the"
                        f" header names {len(columns)}"
                    )
            except BadRequest:
                self._convert(fields_read, lines, kinds)  # a bad field before it comes first
                raise
            if fields is None:
                break
            if not fields or fields == [""]:
                continue  # a blank line, as at the end of many files
            if in_order:
                fields_read.append(fields)
                lines.append(self._reader.line_num)
                if len(fields_read) >= CONVERT_ROWS:
                    batch += self._convert(fields_read, lines, kinds)
                    fields_read, lines = [], []
            else:
                row: list[object] = [None] * width
                try:
                    for at, field, kind, name in zip(positions, fields, kinds, names, strict=True):
                        row[at] = parse(field, kind, name)
                except SqlError:
                    raise self._bad_field(fields, self._reader.line_num) from None
                batch.append(tuple(row))
            if len(batch) >= size:
                yield batch
                batch = []
        batch += self._convert(fields_read, lines, kinds)
        if batch:
            yield batch

    def _convert(self, rows: list[list[str]], lines: list[int], kinds: list[str]) -> list[tuple]:
        """`rows` (each a field per column, in the table's order) as typed rows: each column
        by `values.parse_texts`, and the rows as `parse_text` makes them field by field when
        one column is not for it (where the first bad field is found, named by its line)."""
        if not rows:
            return []
        converted = []
        for texts, kind in zip(zip(*rows, strict=True), kinds, strict=True):
            column = values.parse_texts(texts, kind)
            if column is None:
                break
            converted.append(column)
        else:
            return list(zip(*converted, strict=True))
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


def _utf8_lines(body: IO[bytes]) -> Iterator[str]:
    """The body's lines as text, decoded as they are read; BadRequest at bad UTF-8.

    Read in blocks: a WSGI input stream may have no fast `readline`.
    """
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
        for line in lines:
            yield line + "\n"
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        raise BadRequest(
            f"the body is not valid UTF-8 (it ends inside a character, byte {offset})"
        ) from None
    last = "".join(pending)
    if last:
        yield last

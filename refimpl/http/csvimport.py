"""CSV bodies of POST /imp as typed rows, or a BadRequest naming the line and column.

Only the wire format lives here: the header row names the columns, each field becomes a value
of its column's type (an empty field is NULL), and the first bad field stops the whole import
before anything reaches the engine.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence

from refimpl.engine.result import Column
from refimpl.engine.storage import values
from refimpl.errors import BadRequest, SqlError


def parse_csv(
    text: str, table_columns: Sequence[Column], table: str
) -> tuple[list[str], list[tuple]]:
    """The header's column names (as the table spells them) and the typed rows."""
    by_name = {c.name.casefold(): c for c in table_columns}
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
    except csv.Error as exc:
        raise BadRequest(f"CSV line 1: {exc}") from None
    if not header or header == [""]:
        raise BadRequest("the CSV body is empty; its first line must name the columns")
    columns: list[Column] = []
    seen: set[str] = set()
    for number, name in enumerate(header, start=1):
        column = by_name.get(name.strip().casefold())
        if column is None:
            raise BadRequest(
                f"CSV line 1, column {number}: table '{table}' has no column '{name.strip()}'"
            )
        if column.name.casefold() in seen:
            raise BadRequest(f"CSV line 1, column {number}: column '{column.name}' is named twice")
        seen.add(column.name.casefold())
        columns.append(column)
    rows: list[tuple] = []
    line = 1
    try:
        for fields in reader:
            line = reader.line_num
            if not fields or fields == [""]:
                continue  # a blank line, as at the end of many files
            if len(fields) != len(columns):
                raise BadRequest(
                    f"CSV line {line}: {len(fields)} field(s) where the header names {len(columns)}"
                )
            row = []
            for number, (column, field) in enumerate(zip(columns, fields, strict=True), start=1):
                try:
                    row.append(values.parse_text(field, column.type, column.name))
                except SqlError as exc:
                    raise BadRequest(f"CSV line {line}, column {number}: {exc.message}") from None
            rows.append(tuple(row))
    except csv.Error as exc:
        raise BadRequest(f"CSV line {reader.line_num}: {exc}") from None
    return [c.name for c in columns], rows

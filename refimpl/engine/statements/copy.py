"""COPY: rows read and converted before any lock (`read_copy`), rows written out as text
(`copy_output`); the executor installs what `read_copy` returns as one statement.

`COPY t FROM 'file'` reads only from the import folder of the data folder
(`EngineOptions.import_folder`) and needs the admin user: an absolute path, `..`, or a path
whose symlinks lead out of the folder is refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from refimpl.engine.files import BadName, LeadsOut, NotRelative, folder_path
from refimpl.engine.result import Column
from refimpl.engine.rights import Right
from refimpl.engine.statements.context import StatementContext, visible_schema
from refimpl.engine.statements.copy_binary import BinaryRowReader, encode_binary
from refimpl.engine.statements.copy_formats import CopyFormat, RowReader, encode_rows
from refimpl.engine.statements.queries import QueryRunner
from refimpl.engine.storage import values
from refimpl.errors import CopyError, NotFound
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached
from refimpl.sql.printer import quote_name


@dataclass(frozen=True, slots=True)
class CopyRows:
    """The converted rows of a COPY FROM, in the table's column order, ready to insert."""

    table: str
    columns: list[str]
    rows: values.TypedRows


@dataclass(frozen=True, slots=True)
class CopyOutput:
    """The answer of a COPY TO: its columns, rows and format; `chunks()` is its text."""

    columns: list[Column]
    rows: list[tuple]
    format: CopyFormat

    def chunks(self, rows_per_chunk: int = 1000) -> Iterator[bytes]:
        """The rows in the format, `rows_per_chunk` rows a chunk (the PostgreSQL protocol
        sends one row a CopyData)."""
        if self.format.binary:
            return encode_binary(self.columns, self.rows, rows_per_chunk)
        return encode_rows(self.columns, self.rows, self.format, rows_per_chunk)

    @property
    def content_type(self) -> str:
        if self.format.binary:
            return "application/octet-stream"
        return "text/csv; charset=utf-8" if self.format.csv else "text/plain; charset=utf-8"


def read_copy(
    context: StatementContext, statement: ast.CopyFrom, data: IO[bytes] | None
) -> CopyRows:
    """Check rights, then read and convert every row (no lock held: other writers go on).

    `data` is the STDIN of `COPY ... FROM STDIN`; None for a statement run without it.
    """
    context.authorize(Right.WRITE, statement.table)
    fmt = CopyFormat.of(statement.options)
    schema = visible_schema(context, statement.table)
    table_columns = [Column(c.name, c.type) for c in schema.columns]
    names = list(statement.columns) if statement.columns else [c.name for c in table_columns]
    if statement.file is None:
        if data is None:
            raise CopyError(
                "COPY FROM STDIN takes its rows from the request: send them as the body of"
                " POST /exec?query=COPY ... (text/csv or text/plain), or over the PostgreSQL"
                " protocol's copy messages"
            )
        rows = _read_rows(data, fmt, schema.name, table_columns, names)
    else:
        context.require_admin_user("COPY FROM a file")
        path = import_path(context, statement.file)
        with path.open("rb") as file:
            rows = _read_rows(file, fmt, schema.name, table_columns, names)
    return CopyRows(schema.name, [c.name for c in table_columns], rows)


def _read_rows(
    data: IO[bytes], fmt: CopyFormat, table: str, columns: list[Column], names: list[str]
) -> values.TypedRows:
    """The rows, range-checked for the table's column types as they are read (finite
    DOUBLEs, TIMESTAMPs of years 1 to 9999), so that the insert keeps them as they are."""
    reader = RowReader(data, fmt, table, columns, names)
    rows = (
        BinaryRowReader(data, table, len(columns), reader.placed).rows()
        if fmt.binary
        else reader.rows()
    )
    return values.TypedRows((c.type for c in columns), rows, (c.name for c in columns))


def import_path(context: StatementContext, name: str) -> Path:
    """The file `name` of the import folder; CopyError for a path that leaves it."""
    folder = context.database.path.parent / context.database.options.import_folder
    leads_out = CopyError(
        f"COPY FROM '{name}': the path leads out of the import folder (a"
        " symlink) or is not a file; only files inside it are read"
    )
    try:
        real = folder_path(folder, name)
    except BadName as bad:
        # The name as the message shows it: cut, and its control characters escaped.
        shown = name[:60].encode("unicode_escape").decode("ascii") + ("..." if name[60:] else "")
        raise CopyError(f"COPY FROM '{shown}': {bad.why}") from None
    except NotRelative:
        raise CopyError(
            f"COPY FROM '{name}': name a file of the import folder by a relative path without"
            f" '..' (the folder is '{context.database.options.import_folder}' in the data"
            " folder)"
        ) from None
    except LeadsOut:
        raise leads_out from None
    if not real.exists():
        raise NotFound(f"COPY FROM '{name}': there is no such file in the import folder")
    if not real.is_file():
        raise leads_out
    return real


def copy_output(context: StatementContext, statement: ast.CopyTo) -> CopyOutput:
    """Run the COPY's query with the caller's rights; the rows come back with the format."""
    fmt = CopyFormat.of(statement.options)
    query = statement.query
    if query is None:
        assert statement.table is not None
        columns = "*" if not statement.columns else ", ".join(map(quote_name, statement.columns))
        text = f"SELECT {columns} FROM {quote_name(statement.table)}"
        query = parse_cached(text).statements[0]
    assert isinstance(query, ast.Query)
    output = QueryRunner(context, (), context.transaction_time()).run_locked(query)
    return CopyOutput(output.columns, output.rows, fmt)

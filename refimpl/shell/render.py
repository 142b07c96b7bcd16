"""How the shell shows an answer (a table, CSV or JSON) and an error with its position."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from refimpl.shell.statements import Answer, ShellError

FORMATS = ("table", "csv", "json")
_NUMERIC = frozenset({"INT", "BIGINT", "DOUBLE"})


def cell_text(value: Any) -> str:
    """A value as the table and CSV show it: NULL empty in CSV, shown `NULL` in a table."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return "" if value is None else str(value)


def show(console: Console, answer: Answer, output_format: str) -> None:
    """Print `answer` in `output_format` (one of FORMATS)."""
    if answer.columns is None:
        console.print(Text(answer.message))
        return
    if output_format == "csv":
        console.out(as_csv(answer), end="", highlight=False)
    elif output_format == "json":
        console.out(as_json(answer), highlight=False)
    else:
        console.print(as_table(answer))
        rows = answer.count
        console.print(Text(f"({rows} row{'' if rows == 1 else 's'})"))


def as_table(answer: Answer) -> Table:
    assert answer.columns is not None
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for name, column_type in answer.columns:
        right = column_type in _NUMERIC
        # Text, not a string: rich would read a name like '[b]' as markup.
        table.add_column(Text(name), justify="right" if right else "left", overflow="fold")
    for row in answer.rows:
        table.add_row(
            *(
                Text("NULL", style="dim") if value is None else Text(cell_text(value))
                for value in row
            )
        )
    return table


def as_csv(answer: Answer) -> str:
    assert answer.columns is not None
    out = io.StringIO()
    # RFC 4180's CRLF: a field holding a lone CR or LF is then quoted, so it reads back.
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([name for name, _ in answer.columns])
    writer.writerows([cell_text(v) for v in row] for row in answer.rows)
    return out.getvalue()


def as_json(answer: Answer) -> str:
    """A JSON array with one object per row, keyed by column name."""
    assert answer.columns is not None
    names = [name for name, _ in answer.columns]
    objects = [dict(zip(names, row, strict=True)) for row in answer.rows]
    return json.dumps(objects, ensure_ascii=False, indent=2)


def show_error(console: Console, error: ShellError, text: str) -> None:
    """The error, and when its position is known, its line of the text with a caret under
    the column (as psql shows it)."""
    console.print(Text(f"ERROR: {error.message}", style="bold red"))
    lines = text.splitlines()
    if error.line is None or not 1 <= error.line <= len(lines):
        return
    label = f"LINE {error.line}: "
    console.print(Text(label + lines[error.line - 1]), soft_wrap=True)
    column = max(1, error.column or 1)
    console.print(Text(" " * (len(label) + column - 1) + "^", style="bold red"))

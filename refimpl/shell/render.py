"""How the shell shows an answer (a table, expanded rows, CSV or JSON) and an error with its
position.

An answer becomes plain text in one pass over its rows (60,000 rows in well under a second),
which the shell writes at once or hands to a pager.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from rich.cells import cell_len
from rich.console import Console
from rich.text import Text

from refimpl.shell.statements import ShellError, StatementAnswer

FORMATS = ("table", "csv", "json")
_NUMERIC = frozenset({"INT", "BIGINT", "DOUBLE"})
GAP = "   "  # between two columns of a table
RULE = "─"  # under a table's header


def cell_text(value: Any) -> str:
    """A value as the table and CSV show it: NULL empty in CSV, shown `NULL` in a table."""
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return "" if value is None else str(value)


def answer_text(answer: StatementAnswer, output_format: str, expanded: bool = False) -> str:
    """`answer` as text ending with a line break: a statement's message, or its rows in
    `output_format` (one of FORMATS), a table's rows expanded when `expanded`."""
    if answer.columns is None:
        return answer.message + "\n"
    if output_format == "csv":
        return as_csv(answer)
    if output_format == "json":
        return as_json(answer) + "\n"
    body = as_expanded(answer) if expanded else as_table(answer)
    rows = answer.count
    return f"{body}({rows} row{'' if rows == 1 else 's'})\n"


def _cells(answer: StatementAnswer) -> list[list[list[str]]]:
    """Each row's cells, each cell as its lines (a value holding a line break spans lines)."""
    return [
        [("NULL" if value is None else cell_text(value)).split("\n") for value in row]
        for row in answer.rows
    ]


def _shown(value: Any) -> str:
    """A value as a table cell shows it."""
    if value.__class__ is str:
        return value
    return "NULL" if value is None else cell_text(value)


def as_table(answer: StatementAnswer) -> str:
    """The header, a rule, a line per row (more for a value with line breaks); numbers to
    the right of their column, the rest to the left; no line ends in spaces."""
    assert answer.columns is not None
    names = [name for name, _ in answer.columns]
    right = [column_type in _NUMERIC for _, column_type in answer.columns]
    columns = [list(map(_shown, values)) for values in zip(*answer.rows, strict=True)]
    every = "".join(names) + "".join("".join(texts) for texts in columns)
    # Printable ASCII only: a control character (a line break among them) is no cell wide.
    if answer.rows and every.isascii() and every.isprintable():
        return _plain_table(names, right, columns)
    return _table(names, right, _cells(answer))


def _plain_table(names: list[str], right: list[bool], columns: list[list[str]]) -> str:
    """`as_table` when every cell is one line of ASCII, whose width is its length: each
    column padded at once with str's own methods (60,000 rows in a few tenths of a second)."""
    widths = [
        max(len(name), max(map(len, texts))) for name, texts in zip(names, columns, strict=True)
    ]
    padded = [
        [t.rjust(w) for t in texts] if to_right else [t.ljust(w) for t in texts]
        for texts, w, to_right in zip(columns, widths, right, strict=True)
    ]
    header = GAP.join(name.ljust(w) for name, w in zip(names, widths, strict=True)).rstrip()
    rule = RULE * (sum(widths) + len(GAP) * (len(widths) - 1))
    body = "\n".join(GAP.join(row).rstrip() for row in zip(*padded, strict=True))
    return f"{header}\n{rule}\n{body}\n"


def _table(names: list[str], right: list[bool], rows: list[list[list[str]]]) -> str:
    # A column name holding a line break spans lines as a value does, each line padded apart
    # (one padded string around a break would leave spaces at the end of its first line).
    header = [name.split("\n") for name in names]
    widths = [max(map(cell_len, lines)) for lines in header]
    for row in rows:
        for i, lines in enumerate(row):
            for line in lines:
                # len() first: most values are ASCII, whose cells are their characters.
                if len(line) > widths[i] or (not line.isascii() and cell_len(line) > widths[i]):
                    widths[i] = max(widths[i], cell_len(line))
    height = max((len(lines) for lines in header), default=1)
    out = [_line(header, widths, [False] * len(names), k) for k in range(height)]
    out.append(RULE * (sum(widths) + len(GAP) * (len(widths) - 1)))
    for row in rows:
        height = max((len(lines) for lines in row), default=1)
        out.extend(_line(row, widths, right, k) for k in range(height))
    return "\n".join(out) + "\n"


def _line(row: list[list[str]], widths: list[int], right: list[bool], k: int) -> str:
    parts = []
    for lines, width, to_right in zip(row, widths, right, strict=True):
        text = lines[k] if k < len(lines) else ""
        pad = " " * (width - (len(text) if text.isascii() else cell_len(text)))
        parts.append(pad + text if to_right else text + pad)
    return GAP.join(parts).rstrip()


def as_expanded(answer: StatementAnswer) -> str:
    """Each row as a record: a `-[ RECORD n ]` line, then a `column | value` line per
    column (as psql's `\\x` shows rows)."""
    assert answer.columns is not None
    names = [name for name, _ in answer.columns]
    width = max((cell_len(name) for name in names), default=0)
    out = []
    for number, row in enumerate(_cells(answer), start=1):
        out.append(f"-[ RECORD {number} ]")
        for name, lines in zip(names, row, strict=True):
            label = name + " " * (width - cell_len(name))
            out.append(f"{label} | {lines[0]}".rstrip())
            out.extend(f"{' ' * width} | {line}".rstrip() for line in lines[1:])
    return "".join(line + "\n" for line in out)


def as_csv(answer: StatementAnswer) -> str:
    assert answer.columns is not None
    out = io.StringIO()
    # RFC 4180's CRLF: a field holding a lone CR or LF is then quoted, so it reads back.
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow([name for name, _ in answer.columns])
    writer.writerows([cell_text(v) for v in row] for row in answer.rows)
    return out.getvalue()


def as_json(answer: StatementAnswer) -> str:
    """A JSON array with one object per row, keyed by column name, a row to a line."""
    assert answer.columns is not None
    names = [name for name, _ in answer.columns]
    if not answer.rows:
        return "[]"
    # Row by row with the C encoder: indent= would take the pure-Python one, many times slower.
    encode = json.JSONEncoder(ensure_ascii=False).encode
    lines = ",\n".join("  " + encode(dict(zip(names, row, strict=True))) for row in answer.rows)
    return f"[\n{lines}\n]"


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

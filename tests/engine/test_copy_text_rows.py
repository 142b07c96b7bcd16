"""COPY's text format, read row by row (spec: copy): a line without a backslash takes a
shorter way than one with, and both must give the same fields, NULLs and ends of lines."""

from __future__ import annotations

import io

import pytest

from refimpl.engine.result import Column
from refimpl.engine.statements.copy_formats import CopyFormat, RowReader
from refimpl.sql import ast

COLUMNS = [Column("id", "INT"), Column("name", "STRING")]


def _rows(data: bytes, null: str | None = None) -> list[tuple[object, ...]]:
    options = () if null is None else (ast.CopyOption("null", null),)
    reader = RowReader(io.BytesIO(data), CopyFormat.of(options), "t", COLUMNS, ["id", "name"])
    return list(reader.rows())


def test_plain_and_escaped_lines_give_the_same_rows() -> None:
    data = b"1\ta\n2\t\\N\n3\tb\\tc\r\n4\tlast"
    assert _rows(data) == [(1, "a"), (2, None), (3, "b\tc"), (4, "last")]


@pytest.mark.parametrize("data", [b"1\t\n2\tx\n", b"1\t\r\n2\tx"])
def test_a_null_without_a_backslash_is_null_on_either_way(data: bytes) -> None:
    assert _rows(data, null="") == [(1, None), (2, "x")]
    assert _rows(data.replace(b"x", b"x\\\\"), null="") == [(1, None), (2, "x\\")]


def test_the_end_marker_ends_the_data() -> None:
    assert _rows(b"1\ta\n\\.\n2\tb\n") == [(1, "a")]

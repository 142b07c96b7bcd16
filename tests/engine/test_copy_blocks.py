"""COPY FROM's text and CSV data read a block at a time (`copy_formats.READ_BYTES`): the
rows and the errors do not depend on where the blocks cut it (a line, a line longer than
many blocks, a quoted field, a character of several bytes)."""

from __future__ import annotations

import io

import pytest

from refimpl.engine.result import Column
from refimpl.engine.statements import copy_formats
from refimpl.engine.statements.copy_formats import CopyFormat, RowReader
from refimpl.errors import CopyError
from refimpl.sql import ast

COLUMNS = [Column("id", "BIGINT"), Column("name", "STRING")]
LONG = "ü" * 300 + "x" * 301  # longer than many blocks of the sizes below
TEXT = "".join(f"{n}\t{LONG if n % 5 == 0 else f'é{n} ✓'}\n" for n in range(30))
CSV = "".join(f'{n},"{LONG if n % 5 == 0 else f"é{n}, ✓"}\n{n}"\n' for n in range(30))


def rows_of(data: bytes, csv: bool) -> list[tuple[object, ...]]:
    options = (ast.CopyOption("format", "csv"),) if csv else ()
    reader = RowReader(io.BytesIO(data), CopyFormat.of(options), "t", COLUMNS, ["id", "name"])
    return list(reader.rows())


@pytest.mark.parametrize("block", [1, 2, 3, 7, 64, 1 << 20])
@pytest.mark.parametrize("csv", [False, True])
def test_rows_are_the_same_whatever_the_blocks(
    block: int, csv: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = (CSV if csv else TEXT).encode()
    whole = rows_of(data, csv)
    assert len(whole) == 30 and whole[5] == (5, LONG + "\n5" if csv else LONG)
    monkeypatch.setattr(copy_formats, "READ_BYTES", block)
    assert rows_of(data, csv) == whole


@pytest.mark.parametrize("block", [1, 2, 3, 64, 1 << 20])
def test_bad_utf8_is_named_by_its_byte_whatever_the_blocks(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = TEXT.encode()
    at = data.index("é7".encode())  # é's first byte; its second one broken
    broken = data[:at] + b"\xc3\xff" + data[at + 2 :]
    monkeypatch.setattr(copy_formats, "READ_BYTES", block)
    with pytest.raises(CopyError, match=f"not valid UTF-8 \\(byte {at + 1}\\)"):
        rows_of(broken, csv=False)

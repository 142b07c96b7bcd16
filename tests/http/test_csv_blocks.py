"""A CSV body read a block at a time: the rows and the errors do not depend on where the
blocks cut it (a line, a quoted field, a character of several bytes)."""

from __future__ import annotations

import io

import pytest

from refimpl.engine.result import Column
from refimpl.errors import BadRequest
from refimpl.http import csvimport

COLUMNS = [Column("id", "BIGINT"), Column("name", "STRING")]
BODY = "id,name\n" + "".join(
    f'{n},"é{n}, ✓\n{"x" * (n % 7)}"\n' if n % 3 else f"{n},ü{n}\n" for n in range(40)
)


def rows_of(body: bytes) -> list[tuple]:
    imported = csvimport.CsvImport(io.BytesIO(body), COLUMNS, "t")
    return [row for batch in imported.batches(size=7) for row in batch]


@pytest.mark.parametrize("block", [1, 2, 3, 5, 64, 1 << 20])
def test_rows_are_the_same_whatever_the_blocks(block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = rows_of(BODY.encode())
    assert len(whole) == 40 and whole[1] == (1, "é1, ✓\nx")
    monkeypatch.setattr(csvimport, "READ_BYTES", block)
    assert rows_of(BODY.encode()) == whole


@pytest.mark.parametrize("block", [1, 3, 64, 1 << 20])
def test_bad_utf8_is_named_by_its_byte_whatever_the_blocks(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = BODY.encode()
    at = body.index("ü9".encode())  # ü's first byte; its second one broken
    broken = body[:at] + b"\xc3\xff" + body[at + 2 :]
    monkeypatch.setattr(csvimport, "READ_BYTES", block)
    with pytest.raises(BadRequest, match=f"not valid UTF-8 \\(byte {at + 1}\\)"):
        rows_of(broken)

"""A CSV body read a block at a time: the rows and the errors do not depend on where the
blocks cut it (a line, a quoted field, a character of several bytes)."""

from __future__ import annotations

import io
import re

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


TABLE = [Column("id", "BIGINT"), Column("price", "DOUBLE"), Column("at", "TIMESTAMP")]


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("id,price,at", [(1, 1.5, 1_700_000_000_000_000), (2, None, None)]),
        ("at,id,price", [(1, 1.5, 1_700_000_000_000_000), (2, None, None)]),
        ("price,id", [(1, 1.5, None), (2, None, None)]),
    ],
)
def test_rows_are_in_the_tables_order_whatever_the_headers(
    header: str, expected: list[tuple]
) -> None:
    fields = {"id": ["1", "2"], "price": ["1.5", ""], "at": ["2023-11-14T22:13:20Z", ""]}
    names = header.split(",")
    body = header + "\n" + "".join(",".join(fields[n][i] for n in names) + "\n" for i in range(2))
    imported = csvimport.CsvImport(io.BytesIO(body.encode()), TABLE, "t")
    assert imported.columns == ["id", "price", "at"]
    assert [row for batch in imported.batches() for row in batch] == expected


@pytest.mark.parametrize("header", ["id,price,at", "at,price,id"])
def test_a_bad_field_is_named_by_its_line_and_column(header: str) -> None:
    """The first bad field of the first bad row, counted as the header counts columns."""
    good = {"id": "1", "price": "1.5", "at": "2023-11-14T22:13:20Z"}
    bad = {"id": "2", "price": "cheap", "at": "soon"}
    names = header.split(",")
    body = "\n".join(
        [header, ",".join(good[n] for n in names), "", ",".join(bad[n] for n in names)]
    )
    first_bad = min(names.index("price"), names.index("at")) + 1
    wrong = "price" if names.index("price") < names.index("at") else "at"
    imported = csvimport.CsvImport(io.BytesIO(body.encode()), TABLE, "t")
    with pytest.raises(BadRequest, match=f"^CSV line 4, column {first_bad}: '{bad[wrong]}' "):
        [row for batch in imported.batches() for row in batch]


@pytest.mark.parametrize("convert", [1, 2, 3, 256])
def test_rows_and_the_first_error_do_not_depend_on_the_conversion_chunks(
    convert: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are converted a chunk of `CONVERT_ROWS` at a time, a column by C calls or, when
    one is not for them (a NULL, a text with spaces), field by field: the same rows; and of
    a bad field and a later broken line in one chunk, the bad field is the error, named by
    the line it ends on (it is quoted over two lines)."""
    lines = [
        "id,price,at",
        "1,1.5,2023-11-14T22:13:20Z",
        '2,,"2023-11-14T22:13:21Z"',
        "3,2.5, 2023-11-14T22:13:22Z",
        "4,3.5,2023-11-14T22:13:23.5Z",
    ]
    expected = [
        (1, 1.5, 1_700_000_000_000_000),
        (2, None, 1_700_000_001_000_000),
        (3, 2.5, 1_700_000_002_000_000),
        (4, 3.5, 1_700_000_003_500_000),
    ]
    monkeypatch.setattr(csvimport, "CONVERT_ROWS", convert)
    imported = csvimport.CsvImport(io.BytesIO("\n".join(lines).encode()), TABLE, "t")
    assert [row for batch in imported.batches(size=2) for row in batch] == expected
    broken = [*lines[:2], '5,"4.\n5",2023-11-14T22:13:24Z', "6,cheap,2023-11-14T22:13:25Z", "7,1"]
    imported = csvimport.CsvImport(io.BytesIO("\n".join(broken).encode()), TABLE, "t")
    with pytest.raises(BadRequest, match="^CSV line 4, column 2: '4.\\\\n5' "):
        [row for batch in imported.batches() for row in batch]


@pytest.mark.parametrize("convert", [1, 2, 256])
@pytest.mark.parametrize(
    ("body", "error"),
    [
        ('id,name\n1,"a\nb"\n2,"c\r\nd"\n\n3,e,f\n4,g\n', "CSV line 7: 3 field(s) where"),
        ('id,name\n1,"a\nb"\n\n2,"c', "CSV line 5: unexpected end of data"),
        ('id,name\nx,"a\nb"\n2,"c', "CSV line 3, column 1: 'x' is not"),
        ('id,name\n1,"a\nb"\n2,c\n', None),
    ],
)
def test_lines_are_counted_over_quoted_line_ends(
    body: str, error: str | None, convert: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chunk's rows are read in C: an error names the line its row ends on, each line end
    within a quoted field counted, as the reader counts them."""
    monkeypatch.setattr(csvimport, "CONVERT_ROWS", convert, raising=False)
    imported = csvimport.CsvImport(io.BytesIO(body.encode()), COLUMNS, "t")
    if error is None:
        assert [row for batch in imported.batches() for row in batch] == [
            (1, "a\nb"),
            (2, "c"),
        ]
        return
    with pytest.raises(BadRequest, match=f"^{re.escape(error)}"):
        [row for batch in imported.batches() for row in batch]

"""Binary COPY's decoding a buffer at a time, and COPY FROM STDIN loading as an import does.

The decoder compiles a loop for the COPY's column types; whatever the types, their order,
the columns a statement leaves out, the NULLs and how the data is cut into reads, the rows
are those written, and a value out of range is named by its tuple and column. A COPY outside
a transaction loads its rows as one commit that survives a restart; one the load cannot take
(a key twice, a key held, a table with an index) goes the usual way and says what is wrong.
"""

from __future__ import annotations

import io
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine import copying
from refimpl.engine.instance import Instance
from refimpl.engine.result import Column
from refimpl.engine.session import Session
from refimpl.engine.statements.copy_binary import BinaryRowReader, encode_binary
from refimpl.engine.storage import bulk, values
from refimpl.errors import CopyError, DuplicateKey

VALUES = {
    "INT": st.integers(values.INT_MIN, values.INT_MAX),
    "BIGINT": st.integers(values.BIGINT_MIN, values.BIGINT_MAX),
    "DOUBLE": st.floats(allow_nan=False, allow_infinity=False),
    "STRING": st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    "SYMBOL": st.sampled_from(["a", "b", "é"]),
    "BOOLEAN": st.booleans(),
    "TIMESTAMP": st.integers(values.TIMESTAMP_MIN, values.TIMESTAMP_MAX),
}


class Reads(io.RawIOBase):
    """`data` handed out at most `size` bytes a read, as CopyData messages cut it."""

    def __init__(self, data: bytes, size: int) -> None:
        super().__init__()
        self._data = data
        self._size = size
        self._at = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        block = self._data[self._at : self._at + self._size]
        self._at += len(block)
        return block


@st.composite
def copies(draw: st.DrawFn) -> tuple[list[Column], int, list[int], list[tuple]]:
    """Columns, the table's width, each column's place in it, and rows of those columns,
    with NULLs in runs (a pattern repeated) and alone."""
    types = draw(st.lists(st.sampled_from(sorted(VALUES)), max_size=6))
    columns = [Column(f"c{n}", kind) for n, kind in enumerate(types)]
    width = len(types) + draw(st.integers(0, 2))
    places = draw(st.permutations(range(width)))[: len(types)]
    row = st.tuples(*(VALUES[kind] | st.none() for kind in types))
    rows = []
    for one in draw(st.lists(row, max_size=25)):
        rows += [one] * draw(st.sampled_from([1, 1, 3]))
    return columns, width, places, rows


@settings(max_examples=300, deadline=None)
@given(copy=copies(), size=st.sampled_from([1, 3, 17, 64, 1 << 20]))
def test_binary_rows_decode_the_same_at_any_read_size(
    copy: tuple[list[Column], int, list[int], list[tuple]], size: int
) -> None:
    columns, width, places, rows = copy
    data = b"".join(encode_binary(columns, rows, rows_per_chunk=4))
    reader = BinaryRowReader(
        cast(IO[bytes], Reads(data, size)), "t", width, list(zip(places, columns, strict=True))
    )
    expected = []
    for row in rows:
        placed: list[object] = [None] * width
        for place, value in zip(places, row, strict=True):
            placed[place] = value
        expected.append(tuple(placed))
    assert list(reader.rows()) == expected


COLUMNS = [Column("id", "BIGINT"), Column("at", "TIMESTAMP"), Column("x", "DOUBLE"),
           Column("s", "STRING")]  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 200),
    data=st.data(),
    bad=st.sampled_from([("at", 2**62), ("at", -(2**62)), ("x", math.inf), ("x", math.nan)]),
    size=st.sampled_from([5, 64, 1 << 20]),
)
def test_a_value_out_of_range_is_named_by_its_tuple_and_column(
    count: int, data: st.DataObject, bad: tuple[str, float], size: int
) -> None:
    rows: list[tuple[Any, ...]] = [
        (n, n * 1000, None if n % 4 == 0 else n / 2, f"row {n}") for n in range(count)
    ]
    at = data.draw(st.integers(0, count - 1))
    name, value = bad
    number = 2 if name == "at" else 3
    wrong = list(rows[at])
    # encode_binary writes a TIMESTAMP as its value less 2000-01-01: out of range either way.
    wrong[number - 1] = value
    rows[at] = tuple(wrong)
    encoded = b"".join(encode_binary(COLUMNS, rows))
    reader = BinaryRowReader(
        cast(IO[bytes], Reads(encoded, size)), "t", 4, list(enumerate(COLUMNS))
    )
    with pytest.raises(CopyError, match=f"tuple {at + 1}, column {number} \\({name}\\)"):
        list(reader.rows())


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def session(data: Path) -> Iterator[Session]:
    instance = Instance.open(data)
    session = instance.session()
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, at TIMESTAMP, x DOUBLE, s STRING)")
    yield session
    session.close()
    instance.close()


def binary(rows: list[tuple]) -> io.BytesIO:
    return io.BytesIO(b"".join(encode_binary(COLUMNS, rows)))


ROWS = [(n, n * 1_000_000, None if n % 10 == 0 else n / 4, f"row {n}") for n in range(5000)]
COPY = "COPY t FROM STDIN (FORMAT binary)"


def test_copy_outside_a_transaction_is_one_commit_that_survives_a_restart(data: Path) -> None:
    instance = Instance.open(data)
    session = instance.session()
    session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, at TIMESTAMP, x DOUBLE, s STRING)")
    before = session.database.applied_lsn
    assert copying.copy_in(session, COPY, binary(ROWS)).count == 5000
    assert session.database.applied_lsn == before + 1
    session.close()
    instance.close()
    reopened = Instance.open(data)
    try:
        again = reopened.session()
        assert again.execute("SELECT count(*) FROM t").rows == [(5000,)]
        assert again.execute("SELECT * FROM t WHERE id = 4321").rows == [ROWS[4321]]
        assert again.execute("SELECT count(*) FROM t WHERE x IS NULL").rows == [(500,)]
        again.close()
    finally:
        reopened.close()


def test_a_copy_the_load_cannot_take_goes_the_usual_way(session: Session) -> None:
    twice = ROWS[:10] + [ROWS[3]]
    with pytest.raises(DuplicateKey):
        copying.copy_in(session, COPY, binary(twice))
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]
    copying.copy_in(session, COPY, binary(ROWS[:10]))
    with pytest.raises(DuplicateKey):
        copying.copy_in(session, COPY, binary(ROWS[9:20]))
    assert session.execute("SELECT count(*) FROM t").rows == [(10,)]
    session.execute("CREATE INDEX t_s ON t (s)")
    copying.copy_in(session, COPY, binary(ROWS[10:20]))
    assert session.execute("SELECT id FROM t WHERE s = 'row 15'").rows == [(15,)]


def test_copy_outside_a_transaction_reads_and_loads_with_quick_switches(
    session: Session, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As an import: threads woken while its rows are read and loaded wait a short switch
    interval for the interpreter lock, and the caller's interval is back after."""
    seen: list[float] = []
    load_rows = Session.load_rows

    def watched(self: Session, *args: Any) -> Any:
        seen.append(sys.getswitchinterval())
        return load_rows(self, *args)

    monkeypatch.setattr(Session, "load_rows", watched)
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # as `refimpl serve` sets it
    try:
        assert copying.copy_in(session, COPY, binary(ROWS[:10])).count == 10
        assert sys.getswitchinterval() == pytest.approx(0.0005)
    finally:
        sys.setswitchinterval(before)
    assert seen == [pytest.approx(bulk.LOAD_SWITCH_SECONDS)]


def test_copy_inside_a_transaction_waits_for_its_commit(session: Session) -> None:
    session.execute("BEGIN")
    copying.copy_in(session, COPY, binary(ROWS[:100]))
    session.execute("ROLLBACK")
    assert session.execute("SELECT count(*) FROM t").rows == [(0,)]

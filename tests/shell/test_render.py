"""The shell's CSV and JSON output read back to what was answered; when Enter runs a text."""

from __future__ import annotations

import csv
import io
import json

from hypothesis import given
from hypothesis import strategies as st

from refimpl.shell.render import _cells, _table, as_csv, as_json, as_table, cell_text
from refimpl.shell.repl import statement_complete
from refimpl.shell.statements import StatementAnswer

values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)


@st.composite
def answers(draw: st.DrawFn) -> StatementAnswer:
    width = draw(st.integers(1, 4))
    names = draw(st.lists(st.text(min_size=1), min_size=width, max_size=width, unique=True))
    rows = draw(st.lists(st.tuples(*[values] * width), max_size=5))
    columns = tuple((name, "STRING") for name in names)
    return StatementAnswer(columns, tuple(rows), "", len(rows))


@given(answers())
def test_csv_reads_back_as_the_cells(answer: StatementAnswer) -> None:
    read = list(csv.reader(io.StringIO(as_csv(answer), newline="")))
    assert read[0] == [name for name, _ in answer.columns or ()]
    assert read[1:] == [[cell_text(v) for v in row] for row in answer.rows]


@given(answers())
def test_json_reads_back_as_the_values(answer: StatementAnswer) -> None:
    names = [name for name, _ in answer.columns or ()]
    assert json.loads(as_json(answer)) == [
        dict(zip(names, row, strict=True)) for row in answer.rows
    ]


def test_enter_runs_a_statement_at_its_semicolon_and_commands_at_once() -> None:
    assert not statement_complete("SELECT 1")
    assert not statement_complete("SELECT 1;\nSELECT")
    assert statement_complete("SELECT 1\nFROM t;  ")
    assert statement_complete("\\d t")
    assert statement_complete("quit")
    assert statement_complete("   ")


@given(answers(), st.lists(st.booleans(), min_size=4, max_size=4))
def test_the_fast_table_is_the_table(answer: StatementAnswer, right: list[bool]) -> None:
    """A table of one-line ASCII cells is drawn by padding whole columns at once; it is the
    same text as the cell-by-cell drawing, which also takes wide characters and line breaks."""
    assert answer.columns is not None
    columns = tuple(
        (name, "INT" if to_right else "STRING")
        for (name, _), to_right in zip(answer.columns, right, strict=False)
    )
    answer = StatementAnswer(columns, answer.rows, "", answer.count)
    names = [name for name, _ in columns]
    slow = _table(names, [t == "INT" for _, t in columns], _cells(answer))
    assert as_table(answer) == slow
    lines = slow.split("\n")
    assert len(lines) >= len(answer.rows) + 3 and lines[-1] == ""  # header, rule, rows, end
    assert not any(line.endswith(" ") for line in lines)

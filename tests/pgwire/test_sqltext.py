"""How a query text is cut into statements (refimpl.pgwire.sqltext): read by runs, not a
character at a time, with the same answers: quoted parts (doubled quotes, E'...' with its
backslashes), quoted names, comments, `$n` placeholders and `$$` bodies."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.pgwire.sqltext import read_by_runs, split

PARTS = [
    "'", "''", '"', '""', "\\", "E'", "e'", "x", "é", "²", "1", "$", "$1", "$12", "$a$", "$$",
    "--", "\n", "/*", "*/", ";", " ", "-", "/", "BEGIN", "CASE", "END", "end", "CREATE ",
    "_", "a$1", "Ab9",
]  # fmt: skip


def test_a_long_quoted_value_is_one_piece_of_one_statement() -> None:
    query = "SELECT id, '" + "x;" * 7_000 + "' AS pad FROM big WHERE id < $1"
    assert [(p.text, p.offset, p.params) for p in split(query)] == [(query[:-2] + "?", 0, (1,))]


def test_quoted_parts_end_where_postgresql_ends_them() -> None:
    texts = [p.text for p in split(r"SELECT E'a\';b', 'c'';d', e'\\'; SELECT 'x\'; 2")]
    assert texts == [r"SELECT E'a\';b', 'c'';d', e'\\'", r"SELECT 'x\'", "2"]
    assert [p.text for p in split('SELECT "a"";b" ; SELECT 1')] == ['SELECT "a"";b"', "SELECT 1"]
    assert [p.text for p in split("SELECT 'never closed; SELECT 2")] == [
        "SELECT 'never closed; SELECT 2"
    ]


def test_a_dollar_before_a_digit_that_is_not_ascii_is_no_placeholder() -> None:
    # str.isdigit() is true of '²', which int() cannot read: the split raised ValueError.
    pieces = split("SELECT $², $1")
    assert [(p.text, p.params) for p in pieces] == [("SELECT $², ?", (1,))]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=40))
def test_each_piece_is_the_client_text_at_its_offset(parts: list[str]) -> None:
    """Whatever the text, each statement is the client's text at its offset, with each `$n`
    written `?` and padded to its width, and the numbers are those of the `$n` replaced."""
    text = "".join(parts)
    for piece in split(text):
        # The piece is stripped: a placeholder's padding may be cut at its end.
        original = text[piece.offset : piece.offset + len(piece.text) + 40]
        expected = list(original)
        numbers: list[int] = []
        for at in (m.start() for m in re.finditer(r"\?", piece.text)):
            if original[at] == "$":  # a placeholder: `?` then spaces, as wide as `$n`
                digits = re.match(r"[0-9]+", original[at + 1 :])
                assert digits is not None
                width = len(digits.group())
                expected[at : at + 1 + width] = ["?"] + [" "] * width
                numbers.append(int(digits.group()))
        assert "".join(expected)[: len(piece.text)] == piece.text
        assert tuple(numbers) == piece.params


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PARTS), max_size=40))
def test_a_text_needing_no_cut_answers_as_one_read_by_runs(parts: list[str]) -> None:
    """`split`'s quick answer (a text without `$`, `;` or comments) is the full reading's."""
    text = "".join(parts)
    assert split(text) == read_by_runs(text)

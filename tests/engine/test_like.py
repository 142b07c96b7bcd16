"""LIKE matching: the same answers as a reference matcher, in time linear in the pattern."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.query.like import like_matcher
from refimpl.errors import StatementTimeout


def reference(pattern: str, text: str) -> bool:
    """The textbook dynamic program: matched[i][j] is pattern[:i] LIKE text[:j]."""
    matched = [[False] * (len(text) + 1) for _ in range(len(pattern) + 1)]
    matched[0][0] = True
    for i, char in enumerate(pattern, start=1):
        matched[i][0] = matched[i - 1][0] and char == "%"
        for j in range(1, len(text) + 1):
            if char == "%":
                matched[i][j] = matched[i - 1][j] or matched[i][j - 1]
            elif char == "_" or char == text[j - 1]:
                matched[i][j] = matched[i - 1][j - 1]
    return matched[len(pattern)][len(text)]


def regex_reference(pattern: str, text: str) -> bool:
    """LIKE as a whole-text regular expression: `%` is `.*`, `_` is `.`, both across lines."""
    translated = "".join(
        ".*" if char == "%" else "." if char == "_" else re.escape(char) for char in pattern
    )
    return re.fullmatch(translated, text, re.DOTALL) is not None


@settings(max_examples=3000, deadline=None)
@given(st.text("ab%_", max_size=10), st.text("abB", max_size=12))
def test_like_agrees_with_the_reference(pattern: str, text: str):
    assert like_matcher(pattern)(text) == reference(pattern, text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=8), st.text(max_size=12))
def test_like_agrees_on_any_characters(pattern: str, text: str):
    assert like_matcher(pattern)(text) == reference(pattern, text)


def test_examples():
    assert like_matcher("NA%")("NABIL")
    assert not like_matcher("na%")("NABIL")
    assert like_matcher("N_BIL")("NABIL")
    assert like_matcher("%")("")
    assert like_matcher("")("")
    assert not like_matcher("_")("")
    assert like_matcher("%ab_")("abcabd")
    assert like_matcher("a%\n")("a\n\n")  # % takes line breaks too


def test_a_backtracking_pattern_costs_its_length():
    # A regex of this pattern backtracks for hours; the matcher answers in milliseconds.
    # The bound is generous: it only tells linear from exponential.
    text = "a" * 40 + "!"
    started = time.monotonic()
    assert not like_matcher("%a" * 22 + "%b")(text)
    assert not like_matcher("%a" * 5000 + "%b")("a" * 100_000)
    assert time.monotonic() - started < 2.0


@settings(max_examples=1000, deadline=None)
@given(st.text("ab_", min_size=7, max_size=24).map(lambda p: f"%{p}%"), st.text("ab", max_size=40))
def test_pieces_of_many_runs_agree_with_the_reference(pattern: str, text: str):
    """Pieces of more than three runs are checked by one compiled expression."""
    assert like_matcher(pattern)(text) == reference(pattern, text)


# Pieces of several different runs (`ab_c_ab`) over texts where each run occurs, often out
# of place: the search moves from run to run before it checks a whole piece.
PIECES = st.lists(st.sampled_from(["a", "b", "ab", "ba", "c", "_", "__", "%", ".", "*", "\n"]))


@settings(max_examples=3000, deadline=None)
@given(PIECES.map("".join), st.text("abc.*\n", max_size=30))
def test_pieces_of_different_runs_agree_with_a_regular_expression(pattern: str, text: str) -> None:
    assert like_matcher(pattern)(text) == regex_reference(pattern, text)


@settings(max_examples=300, deadline=None)
@given(PIECES.map("".join), st.text("ab", min_size=40, max_size=400))
def test_long_texts_agree_with_a_regular_expression(pattern: str, text: str) -> None:
    assert like_matcher(pattern)(text) == regex_reference(pattern, text)


def test_a_piece_with_a_run_the_text_lacks_costs_one_scan() -> None:
    """`%a_a_..._b%` over 300 KB of `a`: every place was a candidate, checked over the whole
    piece (17 s); a `b` that occurs nowhere after the start ends the search at once. Where the
    runs alternate (`abab...`), the search moves from run to run in linear time."""
    pattern = "%" + "a_" * 4000 + "b%"
    started = time.monotonic()
    assert like_matcher(pattern)("a" * 300_000) is False
    assert like_matcher(pattern)("b" * 8001 + "a" * 292_000) is False
    assert like_matcher(pattern)("ab" * 150_000) is False
    assert like_matcher(pattern)("a" * 300_000 + "b") is True
    assert time.monotonic() - started < 5.0  # generous: linear against minutes


def test_a_costly_like_stops_at_the_statement_timeout(tmp_path: Path):
    """A pattern whose every place is a candidate, over a long text: one value's loop, that
    stops with the statement and changes nothing (over HTTP and the PostgreSQL protocol:
    tests/http/test_like_deadline.py)."""
    db = refimpl.connect(tmp_path, options=EngineOptions(statement_timeout=0.2))
    try:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
        db.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING)")
        # Runs of `a` a little shorter than the piece: every place is a candidate, checked
        # over most of the piece.
        db.execute("INSERT INTO t VALUES (1, ?)", [("a" * 6998 + "bb") * 43])
        pattern = "%" + "a_" * 4000 + "%"
        started = time.monotonic()
        with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
            db.execute("INSERT INTO u SELECT id, s FROM t WHERE s LIKE ?", [pattern])
        assert time.monotonic() - started < 2.0
        assert db.execute("SELECT count(*) FROM u").rows == [(0,)]
        assert like_matcher(pattern)("a" * 2000) is False  # outside a statement: no deadline
    finally:
        db.close()

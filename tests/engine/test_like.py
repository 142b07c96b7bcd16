"""LIKE matching: the same answers as a reference matcher, in time linear in the pattern."""

from __future__ import annotations

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


def test_a_costly_like_stops_at_the_statement_timeout(tmp_path: Path):
    """A pattern whose every place is a candidate, over a long text: one value's loop, that
    stops with the statement and changes nothing (over HTTP and the PostgreSQL protocol:
    tests/http/test_like_deadline.py)."""
    db = refimpl.connect(tmp_path, options=EngineOptions(statement_timeout=0.2))
    try:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
        db.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING)")
        db.execute("INSERT INTO t VALUES (1, ?)", ["a" * 300_000])
        pattern = "%" + "a_" * 4000 + "b%"
        started = time.monotonic()
        with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
            db.execute("INSERT INTO u SELECT id, s FROM t WHERE s LIKE ?", [pattern])
        assert time.monotonic() - started < 2.0
        assert db.execute("SELECT count(*) FROM u").rows == [(0,)]
        assert like_matcher(pattern)("a" * 2000) is False  # outside a statement: no deadline
    finally:
        db.close()

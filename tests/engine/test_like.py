"""LIKE matching: the same answers as a reference matcher, with work linear in the pattern and
the text (counted in steps and characters read, not timed)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from types import FrameType
from typing import SupportsIndex

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


class _Runaway(AssertionError):
    """The matcher did more work than its budget: more than linear in its input."""


class _Work:
    """Work counted in steps (each call the matcher makes, in Python or C) and characters
    (each its searches may read): a count the machine's load does not change, where a
    bound in seconds failed on a loaded machine. It raises once past its budget, so that a
    matcher gone quadratic or exponential fails at once instead of running for hours."""

    def __init__(self, budget: int) -> None:
        self.spent = 0
        self.budget = budget

    def add(self, amount: int) -> None:
        self.spent += amount
        if self.spent > self.budget:
            raise _Runaway(f"more than {self.budget} steps and characters read")


class _Scanned(str):
    """A text that counts what each search of it may read: from its start to where it found
    its needle, or to its end."""

    work: _Work

    def find(self, sub: str, start: SupportsIndex | None = 0, end: SupportsIndex | None = None):
        first = 0 if start is None else max(int(start), 0)
        stop = len(self) if end is None else min(int(end), len(self))
        found = str.find(self, sub, first, stop)
        self.work.add(1 + max(0, (stop if found < 0 else found + len(sub)) - first))
        return found

    def startswith(self, prefix, start: SupportsIndex | None = 0, end=None) -> bool:
        self.work.add(1 + (len(prefix) if isinstance(prefix, str) else sum(map(len, prefix))))
        return str.startswith(self, prefix, start, end)


LINEAR = 8  # steps and characters a character of text and pattern; the matcher takes < 5


def _linear_work(pattern: str, text: str) -> bool:
    """The matcher's answer, failing once the work passes LINEAR a character of
    the text and the pattern. A call of a compiled expression counts its pattern's length:
    the matcher's expressions have a fixed length and cannot read further."""
    matcher = like_matcher(pattern)
    work = _Work(LINEAR * (len(text) + len(pattern)))
    value = _Scanned(text)
    value.work = work

    def count(frame: FrameType, event: str, arg: object) -> None:
        if frame.f_code.co_filename == __file__:  # _Scanned's own calls
            return
        if event == "call":
            work.add(1)
        elif event == "c_call":
            owner = getattr(arg, "__self__", None)
            work.add(1 + (len(owner.pattern) if isinstance(owner, re.Pattern) else 0))

    sys.setprofile(count)
    try:
        answer = matcher(value)
    finally:
        sys.setprofile(None)
    return answer


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        # A regex of these backtracks for hours; the matcher's work is linear in its input.
        ("%a" * 22 + "%b", "a" * 40 + "!"),
        ("%a" * 22 + "%b%", "a" * 40 + "!"),  # past the end's check: each `a` found in turn
        ("%a" * 5000 + "%b", "a" * 100_000),
        ("%a" * 5000 + "%b%", "a" * 100_000),
    ],
    ids=["22-a", "22-a-then-b", "5000-a", "5000-a-then-b"],
)
def test_a_backtracking_pattern_costs_its_length(pattern: str, text: str) -> None:
    assert _linear_work(pattern, text) is False


@pytest.mark.parametrize(
    ("text", "matches"),
    [
        ("a" * 300_000, False),
        ("b" * 8001 + "a" * 292_000, False),
        ("ab" * 150_000, False),  # the runs alternate: the search moves from run to run
        ("a" * 300_000 + "b", True),
    ],
    ids=["no-b", "b-before-a", "alternating", "b-at-the-end"],
)
def test_a_piece_with_a_run_the_text_lacks_costs_one_scan(text: str, matches: bool) -> None:
    """`%a_a_..._b%` over 300 KB of `a`: every place was a candidate, checked over the whole
    piece (17 s); a `b` that occurs nowhere after the start ends the search at once. Where the
    runs alternate (`abab...`), the search moves from run to run in linear time."""
    assert _linear_work("%" + "a_" * 4000 + "b%", text) is matches


def test_the_work_count_tells_the_worst_case_from_linear() -> None:
    """The one case the module names as costing text times pattern (runs of `a` a little
    shorter than the piece: every place a candidate, checked over most of the piece) passes
    the budget: the count can fail. Such a LIKE stops at the statement timeout instead."""
    with pytest.raises(_Runaway):
        _linear_work("%" + "a_" * 400 + "%", ("a" * 698 + "bb") * 43)


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

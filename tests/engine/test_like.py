"""LIKE matching: the same answers as a reference matcher, in time linear in the pattern."""

from __future__ import annotations

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.engine.query.like import like_matcher


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

"""`recognise` answers None at once for a text no setting command begins like, and reads
every other text by its patterns: the same answers as the patterns alone give."""

from __future__ import annotations

from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import KdbError
from refimpl.pgwire.session_settings import read_setting, recognise

WORDS = [
    "SET", "set", "ſet", "SHOW", "show", "RESET", "DISCARD", "discard", "DEALLOCATE", "ALL",
    "all", "SELECT", "x", "search_path", "TO", "=", "'a'", "time zone", "TRANSACTION",
    "ISOLATION LEVEL", "SERIALIZABLE", "PREPARE", "s1", " ", "\n", ";", "é", "1", "sel",
    "DELETE", "sl", "sheLL",
]  # fmt: skip


def outcome(read: Callable[[str], object], text: str) -> object:
    try:
        return read(text)
    except KdbError as error:
        return type(error), str(error)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=8), st.sampled_from(["", " ", "\t"]))
def test_recognise_answers_as_the_patterns_alone(words: list[str], between: str) -> None:
    text = between.join(words)
    stripped = text.strip().rstrip(";").strip()
    assert outcome(recognise, text) == outcome(read_setting, stripped)


def test_a_long_s_begins_a_set_as_the_patterns_read_it() -> None:
    assert recognise("ſet search_path = x") is not None
    assert recognise("  show time zone;") is not None
    assert recognise("SELECT 1") is None

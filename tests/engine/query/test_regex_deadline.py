"""A regular expression's match is bounded: a pattern is at most 1,024 characters and 1 MB
of RE2 program (compiling holds the interpreter lock), and a search starts only when its
worst case (the text's length times the program's size) fits in the statement's time left,
since one RE2 call cannot be stopped (refimpl.engine.query.regex)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.query import regex
from refimpl.engine.query.regex import matcher
from refimpl.errors import InvalidValue, SearchPastDeadline, StatementTimeout, StatementTooLarge
from refimpl.pgwire.sqlstate import sqlstate_of

# The longest pattern allowed, and its program of 1,027 steps: over the 300 KB text its worst
# case (RE2's automaton giving up, stepping through every state at each character) is 3 s.
COSTLY = "a?" * 511 + "b"
TEXT = "a" * 300_000


@pytest.fixture()
def db(tmp_path: Path) -> Iterator[refimpl.Connection]:
    connection = refimpl.connect(tmp_path, options=EngineOptions(statement_timeout=2.0))
    connection.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    connection.execute("CREATE TABLE u (id INT PRIMARY KEY, s STRING)")
    connection.execute("INSERT INTO t VALUES (1, ?)", [TEXT])
    yield connection
    connection.close()


def test_a_costly_match_stops_at_the_statement_timeout(db: refimpl.Connection) -> None:
    assert len(COSTLY) == regex.MAX_PATTERN_CHARS - 1
    # Its worst case (300,000 x 1,027 steps) is past the 2 s: stopped before it searches.
    assert len(TEXT) * regex._compiled(COSTLY, False).programsize * regex.SECONDS_PER_STEP > 2
    with pytest.raises(SearchPastDeadline) as refused:
        db.execute("INSERT INTO u SELECT id, s FROM t WHERE s ~ ?", [COSTLY])
    # The timeout's error (57014 over the protocol), saying that no search ran, and why.
    assert isinstance(refused.value, StatementTimeout)
    message = str(refused.value)
    assert f"search of a {len(TEXT):,}-character text could take up to" in message
    assert "statement_timeout_ms, so it was not started" in message
    assert db.execute("SELECT count(*) FROM u").rows == [(0,)]
    # The same pattern over a text whose worst case fits is searched, and answers.
    db.execute("INSERT INTO t VALUES (2, ?)", ["a" * 2000 + "b"])
    rows = db.execute("SELECT id FROM t WHERE id = 2 AND s ~ ?", [COSTLY]).rows
    assert rows == [(2,)]


def test_long_matches_that_are_quick_still_answer(db: refimpl.Connection) -> None:
    """A pattern of alternatives over the same text, and patterns whose answer a part of the
    text would get wrong (the end of the text, a match only at the end)."""
    words = "(" + "|".join(f"w{i:03d}x" for i in range(40)) + ")"
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", [words]).rows == [(0,)]
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", ["(a|b)a{5}$"]).rows == [(1,)]
    db.execute("UPDATE t SET s = s || 'b' WHERE id = 1")
    at_end = "(" + "|".join(f"w{i:03d}x" for i in range(40)) + "|ab)$"
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", [at_end]).rows == [(1,)]
    assert db.execute("SELECT count(*) FROM t WHERE s !~ ?", [at_end]).rows == [(0,)]


def test_a_pattern_past_its_length_is_refused_naming_the_limit(db: refimpl.Connection) -> None:
    too_long = "a?" * 512 + "b"  # 1,025 characters
    with pytest.raises(StatementTooLarge, match="1025 characters, more than the 1024"):
        db.execute("INSERT INTO u SELECT id, s FROM t WHERE s ~ ?", [too_long])
    with pytest.raises(StatementTooLarge, match="1024"):
        db.execute("SELECT count(*) FROM t WHERE s !~* ?", ["x" * 5000])
    assert db.execute("SELECT count(*) FROM u").rows == [(0,)]


def test_a_pattern_past_its_program_size_is_refused_naming_the_limit(
    db: refimpl.Connection,
) -> None:
    # 256 Unicode letter classes, each optional: short to write, but a program of many MB.
    huge = r"\pL?" * 256
    with pytest.raises(StatementTooLarge, match=r"more than the 1 MB of program"):
        db.execute("INSERT INTO u SELECT id, s FROM t WHERE s ~ ?", [huge])
    assert db.execute("SELECT count(*) FROM u").rows == [(0,)]


def test_an_unreadable_pattern_is_still_an_invalid_value(db: refimpl.Connection) -> None:
    with pytest.raises(InvalidValue, match=r"invalid regular expression 'a\(b'"):
        db.execute("SELECT count(*) FROM t WHERE s ~ ?", ["a(b"])


def test_outside_a_statement_a_match_has_no_deadline() -> None:
    assert matcher("~")("a" * 2000 + "b", COSTLY) is True
    assert matcher("!~")("a" * 20_000, COSTLY) is True


def test_a_pattern_past_a_limit_is_54000_over_the_protocol(db: refimpl.Connection) -> None:
    with pytest.raises(StatementTooLarge) as refused:
        db.execute("SELECT count(*) FROM t WHERE s ~ ?", ["a?" * 513])
    assert sqlstate_of(refused.value) == "54000"


def test_a_long_search_waits_for_its_turn_within_the_deadline(db: refimpl.Connection) -> None:
    """Long searches run one at a time: while another holds the turn, a long one stops at
    its deadline (having waited, not searched), a short one runs at once."""
    db.execute("INSERT INTO t VALUES (2, ?), (3, 'ab')", ["a" * 20_000])
    long_pattern = "(?:.?){1000}b"  # over 20,000 characters: a worst case of 1.8 s
    worst = 20_000 * regex._compiled(long_pattern, False).programsize * regex.SECONDS_PER_STEP
    assert regex.LONG_SEARCH_SECONDS < worst < 2.0
    long_one = "SELECT id FROM t WHERE id = 2 AND s ~ ?"
    with regex._long_searches:  # another search's turn
        with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
            db.execute(long_one, [long_pattern])
        assert db.execute("SELECT id FROM t WHERE id = 3 AND s ~ 'b$'").rows == [(3,)]
    assert db.execute(long_one, [long_pattern]).rows == []
    assert db.execute(long_one.replace("~", "!~"), [long_pattern]).rows == [(2,)]

"""A regular expression's match stops with the statement: RE2 is linear in the text, but
times the pattern's size at worst, and one RE2 call cannot be stopped, so a match that may
run past the statement's deadline is timed on prefixes first (refimpl.engine.query.regex)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.query.regex import matcher
from refimpl.errors import StatementTimeout

# RE2's automaton gives up on it and steps through its 4,000 states at every character:
# about 39 s over the 300 KB text when run whole.
COSTLY = "a?" * 2000 + "b"
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
    started = time.monotonic()
    with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
        db.execute("INSERT INTO u SELECT id, s FROM t WHERE s ~ ?", [COSTLY])
    assert time.monotonic() - started < 15.0  # generous: against 39 s run whole
    assert db.execute("SELECT count(*) FROM u").rows == [(0,)]


def test_long_matches_that_are_quick_still_answer(db: refimpl.Connection) -> None:
    """A long pattern of alternatives over the same text, and patterns whose answer a prefix
    of the text would get wrong (the end of the text, a match only at the end)."""
    words = "(" + "|".join(f"w{i:04d}x" for i in range(800)) + ")"
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", [words]).rows == [(0,)]
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", ["(a|b)a{5}$"]).rows == [(1,)]
    db.execute("UPDATE t SET s = s || 'b' WHERE id = 1")
    at_end = "(" + "|".join(f"w{i:04d}x" for i in range(800)) + "|ab)$"
    assert db.execute("SELECT count(*) FROM t WHERE s ~ ?", [at_end]).rows == [(1,)]
    assert db.execute("SELECT count(*) FROM t WHERE s !~ ?", [at_end]).rows == [(0,)]


def test_outside_a_statement_a_match_has_no_deadline() -> None:
    assert matcher("~")("a" * 2000 + "b", COSTLY) is True
    assert matcher("!~")("a" * 2000, COSTLY) is True

"""Hypothesis throws SQL at /exec on a real server: never a 5xx, never a traceback in the
server's log, the server alive after every statement, and a failed statement changes nothing.

The statements come from three sources:

* grammar-shaped statements, built as `refimpl.sql.ast` nodes over the fixture's tables and
  printed by `refimpl.sql.printer` (so they parse, and reach planning and execution);
* near-valid mutations of that text: a token dropped, doubled, swapped with its neighbour,
  or the text cut short;
* hostile texts: deep nesting (NOT, unary +, AND, function calls, parentheses), huge
  literals (integers past 2^64 and past Python's 4,300-digit conversion limit, long strings,
  long IN lists, many VALUES rows), and every type's edge values (TIMESTAMP at and past
  0001-01-01 and 9999-12-31, INT and BIGINT at and past their bounds, NaN and infinities,
  empty strings, NUL characters).

`tools/fuzz_sql.py` runs the same generators for 100,000 statements and more; this module is
the short run of the default suite (`SQL_FUZZ_EXAMPLES`, 200 by default).
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings

from tests.http.conftest import Server
from tests.http.fuzz_judge import Target, judge, shorten
from tests.http.sql_texts import HOSTILE, sql_texts

EXAMPLES = int(os.environ.get("SQL_FUZZ_EXAMPLES", "200"))


@pytest.fixture
def target(server: Server) -> Target:
    return Target.on(server)


def test_every_hostile_text_gets_a_clear_answer(target: Target) -> None:
    found = {}
    for sql in HOSTILE:
        status, problems = judge(target, sql)
        if problems:
            found[shorten(sql, 120)] = (status, problems)
    assert not found, found


def test_exec_never_fails_the_server_and_failures_change_nothing(target: Target) -> None:
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(sql=sql_texts())
    def check(sql: str) -> None:
        status, problems = judge(target, sql)
        assert not problems, (shorten(sql), status, problems)

    check()

"""refimpl against PostgreSQL 15 on generated schemas' rows and queries (the short run; the
long one is `python tools/differential.py`). Every difference must be one of the dialect
choices spec/sql.md lists, each with its reason; any other fails the test with the query
and both answers."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.differential.compare import CHOICES, choice_ids_in_spec
from tests.differential.session import Figures, connected_pair, differential_run


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    with connected_pair() as pair:
        yield pair


def test_the_dialect_choices_are_the_spec_table() -> None:
    assert [choice.id for choice in CHOICES] == choice_ids_in_spec()


def test_refimpl_answers_as_postgresql_but_for_the_documented_choices(both) -> None:
    theirs, ours = both
    figures = Figures()
    differential_run(theirs, ours, examples=80, per_example=8, figures=figures)
    shown = "\n\n".join(
        f"{sql}\n  PostgreSQL: {pg}\n  refimpl:    {mine}"
        for sql, pg, mine in figures.unexplained[:5]
    )
    assert not figures.unexplained, (
        f"{len(figures.unexplained)} of {figures.queries} queries answered otherwise than"
        f" PostgreSQL, by no documented dialect choice:\n\n{shown}"
    )
    # The run compared answers, not only errors.
    assert figures.agreed - figures.errors_both > figures.queries // 2


def test_a_difference_outside_the_table_is_reported(both) -> None:
    """The comparison can fail: two answers that differ, explained by no dialect choice."""
    from tests.differential.compare import explain, run, same

    theirs, ours = both
    pg = run(theirs, "SELECT 7 / 2")
    mine = run(ours, "SELECT 7.0 / 2")
    assert not same(pg, mine, ordered=False)
    assert explain("SELECT 7 / 2", pg, mine) is None

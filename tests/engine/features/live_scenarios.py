"""What the live-query properties share: a transaction that commits or rolls back whole, the
rounds of commits (and of asking) a scenario is made of, and one scenario's run on a fresh
database."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hypothesis import strategies as st

import refimpl
from refimpl.errors import KdbError


def commit_or_roll_back(session, statements: Sequence[str]) -> None:
    """One transaction; a failing statement (a duplicate key, say) rolls it all back."""
    try:
        session.execute("BEGIN")
        for statement in statements:
            session.execute(statement)
        session.execute("COMMIT")
    except KdbError:
        assert session.transaction is None


def rounds(writes: st.SearchStrategy[str], asks: Sequence[str], most: int) -> st.SearchStrategy:
    """Rounds of (up to three commits of one to three writes, how the client asks next)."""
    commits = st.lists(st.lists(writes, min_size=1, max_size=3), max_size=3)
    return st.lists(st.tuples(commits, st.sampled_from(list(asks))), min_size=1, max_size=most)


def on_fresh_database(
    folder: Path, create: str, check: Callable[[refimpl.Connection], None]
) -> None:
    """Runs `check` on a new database in `folder` holding one table made by `create`."""
    connection = refimpl.connect(folder / "data")
    try:
        connection.execute(create)
        check(connection)
    finally:
        connection.close()

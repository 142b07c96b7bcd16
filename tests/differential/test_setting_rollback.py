"""SET, SET LOCAL and RESET among BEGIN, COMMIT, ROLLBACK, savepoints and failing statements,
sent one by one to PostgreSQL 15 and to refimpl: after each, both show the same values of
the settings, the same transaction status and the same application_name told by
ParameterStatus (spec/pgwire.md, "Session settings": a rollback undoes a SET, ROLLBACK TO
what followed the savepoint, and an error what followed the last savepoint; SET LOCAL lasts
until the transaction ends, and outside one changes nothing)."""

from __future__ import annotations

import psycopg
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.differential.session import connected_pair

STEPS = st.one_of(
    st.just("BEGIN"),  # drawn often: most steps are worth seeing inside a transaction
    st.just("BEGIN"),
    st.sampled_from(["COMMIT", "ROLLBACK", "SELECT nope"]),
    st.sampled_from(["COMMIT", "ROLLBACK", "SELECT nope", "RESET lock_timeout"]),
    st.sampled_from(["RESET application_name", "RESET ALL", "SHOW lock_timeout"]),
    st.integers(1, 9).map(lambda n: f"SET application_name = 'a{n}'"),
    st.integers(1, 9).map(lambda n: f"SET LOCAL application_name = 'l{n}'"),
    st.integers(1, 9).map(lambda n: f"SET lock_timeout = {n * 1000}"),
    st.integers(1, 9).map(lambda n: f"SET LOCAL lock_timeout = '{n}min'"),
    # One Query of several statements: an implicit transaction, undone by an error in it.
    st.integers(1, 9).map(lambda n: f"SET application_name = 't{n}'; SELECT 1"),
    st.integers(1, 9).map(lambda n: f"SET lock_timeout = {n}; SELECT nope"),
    st.integers(1, 2).map(lambda n: f"SAVEPOINT s{n}"),
    st.integers(1, 2).map(lambda n: f"ROLLBACK TO s{n}"),
    st.integers(1, 2).map(lambda n: f"RELEASE s{n}"),
)


def state(conn: psycopg.Connection) -> tuple[str, ...]:
    """What the connection shows after a step (in a failed transaction, SHOW is refused)."""
    status = conn.info.transaction_status.name
    told = conn.info.parameter_status("application_name") or ""
    if status == "INERROR":
        return status, told
    shown = [
        conn.execute(f"SHOW {name}").fetchone() for name in ("application_name", "lock_timeout")
    ]
    return status, told, *(str(row[0]) for row in shown if row is not None)


def send(conn: psycopg.Connection, text: str) -> str:
    """Send `text` as one Query; its error's SQLSTATE, or "" when it succeeded."""
    try:
        conn.execute(text.encode())  # bytes: one simple Query, no parameters
    except psycopg.Error as error:
        return error.sqlstate or "?"
    return ""


def test_settings_in_transactions_are_kept_and_undone_as_postgresql_does() -> None:
    with connected_pair() as (theirs, ours):
        seen: set[str] = set()

        @settings(
            max_examples=100,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(steps=st.lists(STEPS, min_size=1, max_size=10))
        def check(steps: list[str]) -> None:
            for conn in (theirs, ours):
                if conn.info.transaction_status.name != "IDLE":
                    conn.execute("ROLLBACK")
                conn.execute("RESET ALL")
            for step in steps:
                idle = theirs.info.transaction_status.name == "IDLE"
                if (step == "BEGIN") != idle and step in ("BEGIN", "COMMIT", "ROLLBACK"):
                    continue  # a BEGIN in a transaction, or an end outside one: PostgreSQL's
                    # warning, refimpl's error (pgwire.md)
                errors = send(theirs, step), send(ours, step)
                assert errors[0] == errors[1], (step, errors, steps)
                assert state(ours) == state(theirs), (step, steps)
                seen.add(theirs.info.transaction_status.name)

        check()
        assert seen == {"IDLE", "INTRANS", "INERROR"}, seen  # every case drawn

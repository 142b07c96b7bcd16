"""One differential run: PostgreSQL 15 and a real `refimpl serve` started, Hypothesis
drawing data sets and queries, each query run on both and compared. The suite's short run
and `tools/differential.py` (the long one) both use `differential_run`."""

from __future__ import annotations

import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from tests.differential.compare import explain, load, run, same
from tests.differential.generate import query, table_rows
from tests.differential.postgres import Postgres, start_postgres
from tests.http.conftest import Server, start_server
from tests.pgwire.conftest import pg_address


@dataclass
class Figures:
    """What a run saw: queries run, answers that agreed, differences by dialect choice,
    and the differences no choice accounts for (query, PostgreSQL's, refimpl's)."""

    queries: int = 0
    agreed: int = 0
    errors_both: int = 0
    explained: Counter[str] = field(default_factory=Counter)
    unexplained: list[tuple[str, str, str]] = field(default_factory=list)


@contextmanager
def servers() -> Iterator[tuple[Postgres | None, str, Server | None]]:
    """PostgreSQL (or None and why not) and a refimpl server with its PostgreSQL port."""
    postgres, why = start_postgres()
    if postgres is None:
        yield None, why, None
        return
    try:
        folder = Path(tempfile.mkdtemp(prefix="refdiff-"))
        refimpl_server = start_server(folder / "data", "--pg-port", "0")
        try:
            yield postgres, "", refimpl_server
        finally:
            refimpl_server.stop()
    finally:
        postgres.stop()  # also when refimpl's server did not start: no cluster is left running


def connect_refimpl(server: Server) -> psycopg.Connection:
    host, port = pg_address(server)
    name = "diff_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE DATABASE {name}")
    return psycopg.connect(
        host=host, port=port, user="admin", password=server.token, dbname=name, autocommit=True
    )


@contextmanager
def connected_pair(*setup: str) -> Iterator[tuple[psycopg.Connection, psycopg.Connection]]:
    """A connection to PostgreSQL 15 and one to a real refimpl server, in that order, each
    having run `setup`'s statements; the test is skipped where no PostgreSQL 15 runs."""
    with servers() as (postgres, why, refimpl_server):
        if postgres is None or refimpl_server is None:
            pytest.skip(f"no PostgreSQL 15 to compare with: {why}")
        theirs = postgres.connect()
        ours = connect_refimpl(refimpl_server)
        try:
            for conn in (theirs, ours):
                for statement in setup:
                    conn.execute(statement)
            yield theirs, ours
        finally:
            theirs.close()
            ours.close()


def differential_run(
    theirs: psycopg.Connection,
    ours: psycopg.Connection,
    examples: int,
    per_example: int,
    figures: Figures,
    seed: int | None = None,
) -> None:
    """`examples` data sets, each with up to `per_example` queries, run on both."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=seed is None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=table_rows(), asked=st.lists(query(), min_size=1, max_size=per_example))
    def check(data: dict[str, list[tuple]], asked: list[tuple[str, bool]]) -> None:
        load(theirs, data)
        load(ours, data)
        for sql, ordered in asked:
            pg, mine = run(theirs, sql), run(ours, sql)
            figures.queries += 1
            if same(pg, mine, ordered):
                figures.agreed += 1
                figures.errors_both += pg.rows is None
                continue
            reason = explain(sql, pg, mine)
            if reason is not None:
                figures.explained[reason] += 1
            else:
                figures.unexplained.append((sql, _shown(pg), _shown(mine)))

    if seed is not None:
        check = hypothesis_seed(seed)(check)
    check()


def _shown(outcome: object) -> str:
    rows = getattr(outcome, "rows", None)
    if rows is None:
        return f"ERROR {outcome.sqlstate}: {outcome.message}"  # type: ignore[attr-defined]
    return repr(sorted(rows, key=repr)[:8])

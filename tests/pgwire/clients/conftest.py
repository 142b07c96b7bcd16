"""What the client tests share: the SQLAlchemy URL of a server's database and the verdicts
the client check programs (ClientCheck.java, check.js) print."""

from __future__ import annotations

import subprocess

import sqlalchemy as sa

from tests.pgwire.conftest import PgServer


def url(pg: PgServer, db: str, dialect: str = "psycopg", port: int | None = None) -> sa.URL:
    """The admin's URL of `db` for SQLAlchemy's postgresql+`dialect` driver, at `port`
    (a relay's) or the server's own port."""
    return sa.URL.create(
        f"postgresql+{dialect}",
        username="admin",
        password=pg.token,
        host=pg.host,
        port=port or pg.port,
        database=db,
    )


def engine(pg: PgServer, db: str, port: int | None = None) -> sa.Engine:
    """A psycopg engine on `db` without a pool: each connection is a new session."""
    return sa.create_engine(url(pg, db, port=port), poolclass=sa.NullPool)


def verdicts(done: subprocess.CompletedProcess[str], program: str) -> dict[str, str]:
    """Each check's name -> "OK" or why it failed, from lines "OK name" and
    "FAIL name: why"; fails the test unless the program got as far as "connect"."""
    found: dict[str, str] = {}
    for line in done.stdout.splitlines():
        verdict, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        found[name] = "OK" if verdict == "OK" else why
    assert "connect" in found, f"{program} did not connect: {done.stdout}{done.stderr}"
    return found

"""SHOW DATABASES over the PostgreSQL protocol is the engine's statement, not a session
setting: it answers the databases the caller holds a right in, as over /exec."""

from __future__ import annotations

from tests.pgwire.conftest import PgServer


def test_show_databases_lists_only_the_callers_databases(pg: PgServer, db: str) -> None:
    with pg.connect() as admin:
        listed = {row[0] for row in admin.execute("SHOW DATABASES").fetchall()}
        assert {"demo", db} <= listed
        admin.execute("CREATE USER IF NOT EXISTS shower")
        admin.execute(f"GRANT READ ON DATABASE {db} TO shower")
        token = admin.execute("CREATE TOKEN FOR shower").fetchone()
    assert token is not None
    with pg.connect(db, user="shower", password=token[0]) as reader:
        cursor = reader.execute("SHOW DATABASES")
        assert [d.name for d in cursor.description or ()] == ["database"]
        assert [row[0] for row in cursor.fetchall()] == [db]

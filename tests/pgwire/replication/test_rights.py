"""The REPLICATION right: only a user holding it opens a replication connection (only the
admin gives it), and a stream shows only the tables its user may read."""

from __future__ import annotations

import psycopg2
import psycopg2.extras
import pytest

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import (
    read_payloads,
    replication_connection,
    replication_cursor,
)


def test_replication_needs_the_right_and_shows_only_readable_tables(pg: PgServer, db: str) -> None:
    user = "u_" + db
    pg.http.sql(f"CREATE USER {user}", db=db)
    pg.http.sql("CREATE TABLE mine (id INT PRIMARY KEY)", db=db)
    pg.http.sql("CREATE TABLE secret (id INT PRIMARY KEY)", db=db)
    pg.http.sql(f"GRANT SELECT ON mine TO {user}", db=db)
    token = pg.http.new_token(user, db)
    with pytest.raises(psycopg2.OperationalError) as refused:
        replication_connection(pg, db, user, token)
    assert "must be superuser or replication role to start walsender" in str(refused.value)

    # Only the admin gives the right: a database administrator may not.
    boss = "b_" + db
    pg.http.sql(f"CREATE USER {boss}", db=db)
    pg.http.sql(f"GRANT ADMIN ON DATABASE {db} TO {boss}", db=db)
    denied = pg.http.exec(f"ALTER USER {user} REPLICATION", db, pg.http.new_token(boss, db))
    assert denied.status_code == 403
    assert "only the admin user may give or take the REPLICATION right" in denied.text
    assert pg.http.sql(f"ALTER USER {user} REPLICATION", db=db)["message"] == (
        f"user '{user}' now holds the REPLICATION right"
    )

    connection, cursor = replication_cursor(pg, db, user, token)
    cursor.create_replication_slot("s_rights", output_plugin="test_decoding")
    pg.http.sql("INSERT INTO secret VALUES (1)", db=db)
    pg.http.sql("INSERT INTO mine VALUES (2)", db=db)
    cursor.start_replication(
        slot_name="s_rights", decode=True, options={"include-xids": "0", "skip-empty-xacts": "1"}
    )
    got = read_payloads(cursor, 3)
    assert got == ["BEGIN", "table public.mine: INSERT: id[integer]:2", "COMMIT"]
    connection.close()

    pg.http.sql(f"ALTER USER {user} NOREPLICATION", db=db)
    with pytest.raises(psycopg2.OperationalError):
        replication_connection(pg, db, user, token)

"""The SQL functions on slots over HTTP: only the admin user may call them (the REPLICATION
right), a pgoutput slot is not read as text, and a slot made in SQL streams over a
replication connection from where SQL left it."""

from __future__ import annotations

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import read_payloads, replication_cursor


def test_sql_slot_functions(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY)", db=db)
    user = "u_" + db
    pg.http.sql(f"CREATE USER {user}", db=db)
    pg.http.sql(f"GRANT ADMIN ON DATABASE {db} TO {user}", db=db)
    token = pg.http.new_token(user, db)
    refused = pg.http.exec(
        "SELECT * FROM pg_create_logical_replication_slot('s_sql_u', 'test_decoding')", db, token
    )
    assert refused.status_code == 403, refused.text
    assert "needs the REPLICATION right" in refused.text

    pg.http.sql("SELECT * FROM pg_create_logical_replication_slot('s_sql_po', 'pgoutput')", db=db)
    binary = pg.http.exec("SELECT * FROM pg_logical_slot_get_changes('s_sql_po', NULL, NULL)", db)
    assert binary.status_code == 400 and "produces binary output" in binary.text
    bad = pg.http.exec("SELECT * FROM pg_create_logical_replication_slot('s_x', 'wal2json')", db)
    assert bad.status_code == 400 and 'could not access file "wal2json"' in bad.json()["error"]
    pg.http.sql("SELECT pg_drop_replication_slot('s_sql_po')", db=db)

    pg.http.sql("SELECT * FROM pg_create_logical_replication_slot('s_sql', 'test_decoding')", db=db)
    pg.http.sql("INSERT INTO t VALUES (1)", db=db)
    pg.http.sql("INSERT INTO t VALUES (2)", db=db)
    got = pg.http.rows("SELECT data FROM pg_logical_slot_get_changes('s_sql', NULL, 1)", db=db)
    assert [row[0] for row in got][1] == "table public.t: INSERT: id[integer]:1"
    connection, cursor = replication_cursor(pg, db)
    cursor.start_replication(slot_name="s_sql", decode=True, options={"include-xids": "0"})
    received = read_payloads(cursor, 3)
    assert received == ["BEGIN", "table public.t: INSERT: id[integer]:2", "COMMIT"]
    # Dropping a slot a connection streams from is refused.
    busy = pg.http.exec("SELECT pg_drop_replication_slot('s_sql')", db)
    assert busy.status_code == 400 and "is active for PID" in busy.text
    connection.close()

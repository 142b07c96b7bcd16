"""`/api/changes` at small pages reads the log ahead of a page and keeps those records for
the next (`recent_records`): the next pages must show the table as it is when they are read
(a schema change between two pages reaches the rows read ahead before it), and rights are
checked at every page, whatever was read ahead for the reader before."""

from __future__ import annotations

from typing import Any

import requests

from tests.http.conftest import Server


def _page(
    server: Server, db: str, session: requests.Session, after: int, token: str | None = None
) -> requests.Response:
    return session.get(
        f"{server.url}/api/changes",
        params={"db": db, "table": "t", "format": "json", "limit": "1", "from": str(after)},
        headers={"Authorization": f"Bearer {token or server.token}"},
        timeout=30,
    )


def _read(server: Server, db: str, session: requests.Session, after: int) -> Any:
    answer = _page(server, db, session, after)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_rows_read_ahead_are_shown_on_the_schema_of_their_page(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    for n in range(1, 21):  # a transaction a row: a page of limit=1 reads one
        server.sql(f"INSERT INTO t VALUES ({n}, {n * 10})", db)
    with requests.Session() as session:
        first = _read(server, db, session, 0)
        # CREATE TABLE's ddl change first, or the first row: the rows after it are read
        # ahead now, on the columns (id, v).
        server.sql("ALTER TABLE t ADD COLUMN w STRING", db)
        after, rows = first["next"], [c["row"] for c in first["changes"] if c["op"] == "upsert"]
        while True:
            page = _read(server, db, session, after)
            if not page["changes"]:
                break
            rows += [c["row"] for c in page["changes"] if c["op"] == "upsert"]
            after = page["next"]
    # Every row once, in order; those read after the ALTER TABLE with its new column.
    assert [r["id"] for r in rows] == list(range(1, 21))
    assert all(r == {"id": r["id"], "v": r["id"] * 10, "w": None} for r in rows[1:])


def test_rights_are_checked_at_every_page_read_ahead(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    for n in range(1, 11):
        server.sql(f"INSERT INTO t VALUES ({n})", db)
    server.sql("CREATE USER pager", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO pager", db)
    token = server.new_token("pager", db)
    with requests.Session() as session:
        first = _page(server, db, session, 0, token)
        assert first.status_code == 200, first.text
        second = _page(server, db, session, first.json()["next"], token)
        assert second.status_code == 200, second.text
        server.sql("REVOKE SELECT ON t FROM pager", db)
        refused = _page(server, db, session, second.json()["next"], token)
        assert refused.status_code == 403, refused.text
        assert "changes" not in refused.json()
        # The admin, who may read the table, reads on from the same place.
        assert _read(server, db, session, second.json()["next"])["changes"]

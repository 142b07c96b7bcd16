"""`/api/changes` keeps a table's feed description and compiled `where=` between requests:
what it keeps must follow every schema change at the next request, and rights are still
checked at every request, before existence is told."""

from __future__ import annotations

from typing import Any

import requests

from tests.http.conftest import Server


def _changes(server: Server, db: str, session: requests.Session, **params: str) -> Any:
    answer = session.get(
        f"{server.url}/api/changes",
        params={"db": db, "table": "t", "format": "json", **params},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _rows(body: Any) -> list[dict]:
    return [c["row"] for c in body["changes"] if c["op"] == "upsert"]


def test_a_schema_change_reaches_the_next_read(server: Server, db: str) -> None:
    with requests.Session() as session:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
        server.sql("INSERT INTO t VALUES (1, 10)", db)
        first = _changes(server, db, session)
        assert _rows(first) == [{"id": 1, "v": 10}]
        server.sql("ALTER TABLE t ADD COLUMN w STRING", db)
        server.sql("INSERT INTO t VALUES (2, 20, 'two')", db)
        added = _changes(server, db, session, **{"from": str(first["next"])})
        assert _rows(added) == [{"id": 2, "v": 20, "w": "two"}]
        # Dropped and made again under the same name, with other columns and types.
        server.sql("DROP TABLE t", db)
        server.sql("CREATE TABLE t (k STRING PRIMARY KEY, at TIMESTAMP)", db)
        server.sql("INSERT INTO t VALUES ('a', '2024-01-02T03:04:05Z')", db)
        again = _changes(server, db, session, **{"from": str(added["next"])})
        assert _rows(again) == [{"k": "a", "at": "2024-01-02T03:04:05.000Z"}]


def test_a_kept_filter_follows_the_schema(server: Server, db: str) -> None:
    with requests.Session() as session:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
        server.sql("INSERT INTO t VALUES (1, 5), (2, 50)", db)
        for _ in range(2):  # the second request is answered by the kept filter
            assert _rows(_changes(server, db, session, where="v > 10")) == [{"id": 2, "v": 50}]
        server.sql("ALTER TABLE t DROP COLUMN v", db)
        answer = session.get(
            f"{server.url}/api/changes",
            params={"db": db, "table": "t", "format": "json", "where": "v > 10"},
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=30,
        )
        assert answer.status_code == 400, answer.text
        assert "v" in answer.json()["error"]


def test_rights_are_checked_at_every_read(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("INSERT INTO t VALUES (1)", db)
    server.sql("CREATE USER reader", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO reader", db)
    token = server.new_token("reader", db)
    headers = {"Authorization": f"Bearer {token}"}
    params = {"db": db, "table": "t", "format": "json"}
    with requests.Session() as session:
        url = f"{server.url}/api/changes"
        assert session.get(url, params=params, headers=headers, timeout=30).status_code == 200
        server.sql("REVOKE SELECT ON t FROM reader", db)
        refused = session.get(url, params=params, headers=headers, timeout=30)
        assert refused.status_code == 403, refused.text
        # Without a right in the database, a missing table is not told apart from one there.
        server.sql(f"REVOKE READ ON DATABASE {db} FROM reader", db)
        for table in ("t", "no_such_table"):
            answer = session.get(
                url, params={**params, "table": table}, headers=headers, timeout=30
            )
            assert answer.status_code == 403, answer.text
            assert "no_such_table" not in answer.text

"""A `where=` predicate is checked whenever a change is read, long after its commit: now()
and kdb_rev() in it are refused with a 400 that says why (before, now() was the epoch, so
`where=ts < now()` let no change through, silently)."""

from __future__ import annotations

import pytest
import requests

from tests.http.conftest import Server


@pytest.mark.parametrize("path", ["/api/changes", "/stream/changes"])
@pytest.mark.parametrize("predicate", ["ts > now()", "now() < '1971-01-01'", "kdb_rev() > 0"])
def test_a_filter_whose_value_changes_is_refused(
    server: Server, db: str, path: str, predicate: str
) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP)", db)
    server.sql("INSERT INTO t VALUES (1, '2001-01-01T00:00:00Z')", db)
    answer = requests.get(
        f"{server.url}{path}",
        params={"db": db, "table": "t", "where": predicate},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
        stream=True,
    )
    with answer:
        assert answer.status_code == 400, answer.status_code
        error = answer.json()["error"]
    assert "where= cannot use now() or kdb_rev()" in error, error


def test_a_constant_time_still_filters(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, ts TIMESTAMP)", db)
    server.sql("INSERT INTO t VALUES (1, '2001-01-01T00:00:00Z'), (2, '2030-01-01T00:00:00Z')", db)
    answer = requests.get(
        f"{server.url}/api/changes",
        params={"db": db, "table": "t", "format": "json", "where": "ts > '2024-01-01'"},
        headers={"Authorization": f"Bearer {server.token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    assert [c["row"]["id"] for c in answer.json()["changes"] if c["op"] == "upsert"] == [2]

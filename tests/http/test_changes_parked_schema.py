"""A long poll of `/api/changes` parked before a schema change answers the rows after it
with the table's new columns, as a request made after the change does (spec/changefeeds.md:
a reader learns of a new column before the first row that has it)."""

from __future__ import annotations

import threading
import time
from typing import Any

import requests

from tests.http.conftest import Server


# The plan (its columns, their types, the shared answers' key) is made when the request
# comes; a wake-up after a schema change must make it again, not map the rows onto the
# columns of that time.
def test_a_parked_poll_shows_a_column_added_while_it_waited(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 5)", db)
    got: list[Any] = []

    def poll() -> None:
        answer = requests.get(
            f"{server.url}/api/changes",
            params={"db": db, "table": "t", "format": "json", "from": "2", "wait": "20000"},
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=60,
        )
        got.append((answer.status_code, answer.json()))

    waiter = threading.Thread(target=poll)
    waiter.start()
    time.sleep(1.0)  # lets the poll park (a commit before it parks gives the same answer)
    server.sql("BEGIN; ALTER TABLE t ADD COLUMN w INT; INSERT INTO t VALUES (2, 50, 1); COMMIT", db)
    waiter.join(60)
    assert got, "the long poll did not answer"
    status, body = got[0]
    assert status == 200, body
    rows = [c["row"] for c in body["changes"] if c["op"] == "upsert"]
    assert rows == [{"id": 2, "v": 50, "w": 1}], body

"""A SELECT's costly WHERE over a scan holds no commit (spec: sql, reads and commits; issue:
isolation, one user's work holds nobody else).

A READ user's `/exec` SELECT scans a table with a WHERE that costs milliseconds a row (a
LIKE of a 400-byte pattern over 10 KB texts: seconds over the table, within a long
statement timeout). Meanwhile another user's commits in the same database go through, and
its stream gets each of their events, within a few seconds; the SELECT answers its rows,
and nothing committed changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import Server, running_server
from tests.http.stream_client import open_stream
from tests.http.victims import tick_while

DOCS = 500
TEXT = ("a" * 98 + "bb") * 100  # 10 KB
PATTERN = "%" + "a_" * 200 + "%"  # no match: every candidate of every row is tried
LIVELY_SECONDS = 3.0  # a victim's commit and its event within this while the SELECT runs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("scan-where") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("statement_timeout_ms = 120000\n")
    with running_server(data) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        for first in range(0, DOCS, 50):
            rows = ", ".join(f"({i}, '{TEXT}')" for i in range(first, first + 50))
            running.sql(f"INSERT INTO docs VALUES {rows}")
        running.sql("INSERT INTO docs VALUES (-1, 'ab')")  # the one row the WHERE keeps
        running.sql("CREATE USER hostile")
        running.sql("GRANT READ ON DATABASE demo TO hostile")
        yield running


def test_a_costly_where_over_a_scan_holds_no_commit(server: Server) -> None:
    hostile = server.new_token("hostile")
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    found: dict[str, requests.Response] = {}
    query = f"SELECT id FROM docs WHERE body LIKE '{PATTERN}' OR body = 'ab'"

    def select() -> None:
        found["answer"] = server.exec(query, token=hostile)

    asking = threading.Thread(target=select)
    asking.start()
    took = tick_while(server, victim, asking, LIVELY_SECONDS)
    # The SELECT took a while: the ticks were made while it ran.
    assert len(took) >= 5, took

    answer = found["answer"]
    assert answer.status_code == 200, answer.text
    assert answer.json()["dataset"] == [[-1]]
    victim.close()
    assert server.rows("SELECT count(*) AS n FROM docs") == [[DOCS + 1]]
    assert server.rows("SELECT count(*) AS n FROM ticks") == [[len(took)]]
    assert "Traceback" not in server.log.read_text()

"""A live query's kept answer is made from the table without holding commits (spec:
subscribe, maintained answers; issue: isolation, the top-N stall).

A READ user subscribes to an ordered window (`offsets=true`, ORDER BY a column the table
does not keep its rows in) whose select list has a costly column (a LIKE of a 200-byte
pattern over 2 KB texts: milliseconds a row, seconds over the table). Its first answer is
a run of the query, then the window's kept state read from the table, each row's columns
computed. Throughout, another user's commits in the same database go through, and its
stream gets each of their events, within a few seconds, and nothing committed changes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import requests

from tests.http.conftest import Server, timed_server
from tests.http.stream_client import open_stream
from tests.http.victims import tick_while

TIMEOUT_MS = 120_000  # the answer is made whole, however slow the machine
DOCS = 2000
TEXT = ("a" * 98 + "bb") * 20  # 2 KB
PATTERN = "%" + "a_" * 100 + "%"  # no match: every candidate of every row is tried
QUERY = f"SUBSCRIBE SELECT id, v, body LIKE '{PATTERN}' AS m FROM docs ORDER BY v DESC LIMIT 10"
LIVELY_SECONDS = 3.0  # a victim's commit and its event within this while the answer is made


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with timed_server(tmp_path_factory.mktemp("live-rebuild"), TIMEOUT_MS) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, v INT, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        for first in range(0, DOCS, 50):
            rows = ", ".join(f"({i}, {i % 97}, '{TEXT}')" for i in range(first, first + 50))
            running.sql(f"INSERT INTO docs VALUES {rows}")
        running.sql("CREATE USER hostile")
        running.sql("GRANT READ ON DATABASE demo TO hostile")
        yield running


def test_a_live_querys_kept_answer_is_made_without_holding_commits(server: Server) -> None:
    hostile = server.new_token("hostile")
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    found: dict[str, requests.Response] = {}

    def subscribe() -> None:
        params = {"db": "demo", "offsets": "true", "query": QUERY}
        found["answer"] = server.get("/api/subscribe", params=params, token=hostile, timeout=200)

    asking = threading.Thread(target=subscribe)
    asking.start()
    took = tick_while(server, victim, asking, LIVELY_SECONDS)
    # The answer took a while: the ticks were made while it was being made.
    assert len(took) >= 5, took

    answer = found["answer"]
    assert answer.status_code == 200, answer.text
    victim.close()
    assert server.rows("SELECT count(*) AS n, min(length(body)) AS l FROM docs") == [
        [DOCS, len(TEXT)]
    ]
    assert server.rows("SELECT count(*) AS n FROM ticks") == [[len(took)]]
    assert "Traceback" not in server.log.read_text()

"""Wait places are shared fairly by user (spec: changes, how long a request waits): one
user's long polls never take every place, so another user's `wait=` still waits instead of
being answered at once (a busy loop for its client); a request over its user's share is
answered at once, with what there is."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import ADMIN, Server, running_server

PLACES = 4  # threads / 4
WAIT_MS = 2500


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("places") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(f"threads = {PLACES * 4}\n")
    with running_server(data) as running:
        running.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        running.sql("CREATE TABLE quiet (id INT PRIMARY KEY)")
        running.sql("INSERT INTO t VALUES (1)")
        running.sql("CREATE USER greedy")
        running.sql("GRANT READ ON DATABASE demo TO greedy")
        yield running


def _poll(server: Server, token: object, table: str = "quiet") -> tuple[float, requests.Response]:
    """A long poll past the end of `table` (nothing comes): how long it took, its answer."""
    durable = server.get("/api/changes", params={"db": "demo", "table": table, "format": "json"})
    after = durable.json()["durable_lsn"]
    started = time.monotonic()
    answer = server.get(
        "/api/changes",
        params={"db": "demo", "table": table, "format": "json", "from": after, "wait": WAIT_MS},
        token=token,
    )
    return time.monotonic() - started, answer


def test_one_users_long_polls_leave_places_to_others(server: Server) -> None:
    greedy = server.new_token("greedy")
    took: list[float] = []

    def greedy_poll() -> None:
        seconds, answer = _poll(server, greedy)
        assert answer.status_code == 200, answer.text
        took.append(seconds)

    polls = [threading.Thread(target=greedy_poll) for _ in range(PLACES)]
    for poll in polls:
        poll.start()
    time.sleep(1.0)  # the greedy user's polls are parked (those within its share)
    seconds, answer = _poll(server, ADMIN)  # the admin: another user
    assert answer.status_code == 200, answer.text
    assert answer.json()["changes"] == []
    assert seconds >= WAIT_MS / 1000 * 0.8, "another user's wait= was answered at once"
    for poll in polls:
        poll.join(10)
    waited = [s for s in took if s >= WAIT_MS / 1000 * 0.8]
    at_once = [s for s in took if s < 1.0]
    assert len(waited) == PLACES // 2  # its share: at most half of the places
    assert len(at_once) == PLACES - PLACES // 2  # over its share: answered at once

"""Two users' costly waiting work does not make a third user's wait (spec: stream, a stream's
own work; changefeeds, where= filters).

Two READ users each keep two event streams of `docs` open with a costly `where=` (a LIKE
of an 8 KB pattern over 300 KB texts, stopped at the statement timeout of 6 s), so that each
of them always has a filter running and another queued on the server's pool for waiters'
own work. Meanwhile a third user's filtered long poll of `ticks` gets each commit within a
bound well under that timeout (with a pool of two threads, one piece of each hostile
user's work running, it waited for one of them to end: up to the timeout), `/health`
answers, the hostile streams end with their `reset`, and nothing committed changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import Server, running_server
from tests.http.stream_client import EventReader, open_stream

TIMEOUT_MS = 6000
TEXT = ("a" * 6998 + "bb") * 43  # 301 KB: runs of `a` shorter than the piece
PATTERN = "%" + "a_" * 4000 + "%"  # 8 KB; no match: every candidate is tried
WHERE = f"body LIKE '{PATTERN}'"
DOCS = 6  # texts of one commit: seconds each, the filter runs to the timeout
LIVELY_SECONDS = 3.0  # half the timeout: a victim's answer, or /health, within this


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("owner-pool") / "data"
    data.mkdir()
    # One commit of every text (a bigger SQL text than the default allows).
    conf = f"statement_timeout_ms = {TIMEOUT_MS}\nmax_sql_bytes = {4 * 1024 * 1024}\n"
    (data / "kdb.conf").write_text(conf)
    with running_server(data) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        for user in ("hostile1", "hostile2", "victim"):
            running.sql(f"CREATE USER {user}")
            running.sql(f"GRANT READ ON DATABASE demo TO {user}")
        yield running


def _durable(server: Server) -> int:
    answer = server.get(
        "/api/changes", params={"db": "demo", "table": "ticks", "format": "json", "limit": "1"}
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["durable_lsn"])


def _filtered_long_poll(server: Server, token: str, tick: int) -> None:
    """The victim's filtered long poll, parked before the commit of `tick`, gets it within
    LIVELY_SECONDS of the commit."""
    found: dict[str, requests.Response] = {}
    params = {"db": "demo", "table": "ticks", "format": "json", "wait": "20000"}
    params |= {"where": "v >= 0", "from": str(_durable(server))}

    def ask() -> None:
        found["answer"] = server.get("/api/changes", params=params, token=token, timeout=30)

    asking = threading.Thread(target=ask)
    asking.start()
    time.sleep(0.3)  # parked before the commit
    started = time.monotonic()
    server.sql(f"INSERT INTO ticks VALUES ({tick}, {tick})")
    asking.join(30)
    took = time.monotonic() - started
    answer = found["answer"]
    assert answer.status_code == 200, answer.text
    assert [c["row"]["id"] for c in answer.json()["changes"]] == [tick]
    assert took < LIVELY_SECONDS, took
    health = server.get("/health", token=None, timeout=LIVELY_SECONDS)
    assert health.status_code == 200


def test_two_users_costly_filters_leave_a_third_users_filtered_long_poll_its_latency(
    server: Server,
) -> None:
    hostile: list[EventReader] = []
    for user in ("hostile1", "hostile2"):
        token = server.new_token(user)
        for _ in range(2):  # one filter running, one queued behind it
            stream = open_stream(server, table="docs", where=WHERE, token=token, read_timeout=60)
            assert stream.take(1)[0]["event"] == "ready"
            hostile.append(stream)
    victim = server.new_token("victim")
    rows = ", ".join(f"({n}, '{TEXT}')" for n in range(DOCS))
    server.sql(f"INSERT INTO docs VALUES {rows}")  # one commit: one take filters them all
    time.sleep(0.5)  # the hostile filters run, and the second of each user's waits
    began = time.monotonic()
    tick = 0
    while time.monotonic() - began < TIMEOUT_MS / 1000:  # every commit while they run
        tick += 1
        _filtered_long_poll(server, victim, tick)
    for stream in hostile:
        reset = stream.next_event()
        assert reset is not None and reset["event"] == "reset" and reset["data"] == {}
        assert any("statement_timeout_ms" in c for c in stream.comments), stream.comments
        stream.close()
    assert server.rows("SELECT count(*) AS n, min(length(body)) AS l FROM docs") == [
        [DOCS, len(TEXT)]
    ]
    assert server.rows("SELECT count(*) AS n FROM ticks") == [[tick]]
    assert "Traceback" not in server.log.read_text()

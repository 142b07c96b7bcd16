"""A filtered long poll whose `where=` runs past the statement timeout answers the timeout's
400 even when its `wait` ends first, and a held (`squash=`) filtered answer is made on its
owner's budget, never on the waiting room's thread (spec: changefeeds, filters; changes,
waiting).

The filter is `tests.http.costly_like`'s LIKE (seconds of work for each row, checked
against the deadline as it goes), and a commit brings three such rows. The long
poll's `wait` (0.5 s) ends while the filter is still looking at that commit: the answer
waits for the filter, which stops at the statement timeout (2 s), and says so, instead of
claiming that nothing came.
Meanwhile another user's stream gets its events and `/health` answers; nothing changes.
A live query's long poll (`/api/subscribe`) whose re-run is still going at the end of its
wait answers the same way (spec: subscribe).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.http.conftest import Server, timed_server
from tests.http.costly_like import PATTERN, TEXT
from tests.http.stream_client import EventReader, open_stream

TIMEOUT_MS = 2000
WHERE = f"body LIKE '{PATTERN}'"
LIVELY_SECONDS = 3.0  # a victim's event, or /health, within this meanwhile
ROWS = 3  # rows of TEXT a commit brings: their filter runs well past the timeout
WAIT_MS = 500  # the long polls' `wait`: it ends while their filter runs
# A commit acknowledged after the wait ended answers nothing new, rightly: a loaded machine
# may take that long, and the case is then tried again (with its own rows).
TRIES = 5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with timed_server(tmp_path_factory.mktemp("filtered-poll"), TIMEOUT_MS) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        running.sql("CREATE USER hostile")
        running.sql("GRANT READ ON DATABASE demo TO hostile")
        yield running


@pytest.fixture(scope="module")
def hostile(server: Server) -> str:
    return server.new_token("hostile")


def _durable(server: Server) -> int:
    answer = server.get(
        "/api/changes", params={"db": "demo", "table": "docs", "format": "json", "limit": "1"}
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["durable_lsn"])


def _write_docs(server: Server) -> int:
    """ROWS rows of TEXT in one commit; the number of rows of docs then."""
    first = _next_id(server, "docs")
    rows = ", ".join(f"({n}, '{TEXT}')" for n in range(first, first + ROWS))
    server.sql(f"INSERT INTO docs VALUES {rows}")
    return first + ROWS - 1


def _next_id(server: Server, table: str) -> int:
    return int(server.rows(f"SELECT coalesce(max(id), 0) AS m FROM {table}")[0][0]) + 1


def _in_thread(
    server: Server, params: dict[str, str], token: str, route: str = "/api/changes"
) -> tuple[threading.Thread, dict[str, Any]]:
    """The GET in a thread of its own; in the dict, its answer, how long it took, and when
    it was asked (`asked`, before the thread started)."""
    found: dict[str, Any] = {"asked": time.monotonic()}

    def run() -> None:
        started = time.monotonic()
        found["answer"] = server.get(route, params=params, token=token, timeout=120)
        found["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    return thread, found


def _within_the_wait(found: dict[str, Any]) -> bool:
    """Whether a commit acknowledged now came before the wait of the request `found` is
    about ended: its deadline is WAIT_MS after the server parked it, which was after it
    was asked, and the commit woke it before its acknowledgement (`Database._make_visible`)."""
    return time.monotonic() - float(found["asked"]) < WAIT_MS / 1000


def _victim_keeps_going(server: Server, victim: EventReader, ticks: int) -> None:
    """Each of `ticks` commits reaches the victim's stream within LIVELY_SECONDS, and
    `/health` answers as fast."""
    for _ in range(ticks):
        n = _next_id(server, "ticks")
        started = time.monotonic()
        server.sql(f"INSERT INTO ticks VALUES ({n}, {n})")
        event = victim.take(1)[0]
        assert event["event"] == "change" and event["data"]["row"]["id"] == n
        assert time.monotonic() - started < LIVELY_SECONDS
        started = time.monotonic()
        assert server.get("/health", token=None, timeout=LIVELY_SECONDS).status_code == 200
        assert time.monotonic() - started < LIVELY_SECONDS


def _refused_with_the_timeout(found: dict[str, Any]) -> None:
    answer = found["answer"]
    assert isinstance(answer, requests.Response)
    assert answer.status_code == 400, answer.text
    assert "statement_timeout_ms" in answer.json()["error"]


def test_a_filter_over_the_timeout_answers_400_though_its_wait_ends_first(
    server: Server, hostile: str
) -> None:
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    params = {"db": "demo", "table": "docs", "format": "json", "where": WHERE}
    params["wait"] = str(WAIT_MS)
    for _ in range(TRIES):
        params["from"] = str(_durable(server))
        thread, found = _in_thread(server, params, hostile)
        time.sleep(0.3)  # parked before the commit
        docs = _write_docs(server)
        in_time = _within_the_wait(found)
        _victim_keeps_going(server, victim, 3)
        thread.join(60)
        if in_time:
            break
    else:
        pytest.fail(f"no commit acknowledged within the wait in {TRIES} tries")
    _refused_with_the_timeout(found)
    # It waited for its filter past its `wait`, and no longer than the filter may run.
    assert 0.5 < float(found["seconds"]) < 10 * TIMEOUT_MS / 1000
    victim.close()
    assert server.rows("SELECT count(*) AS n, min(length(body)) AS l FROM docs") == [
        [docs, len(TEXT)]
    ]


def test_a_quiet_filtered_long_poll_still_answers_nothing_new_at_its_wait(
    server: Server, hostile: str
) -> None:
    start = _durable(server)
    params = {"db": "demo", "table": "docs", "format": "json", "where": WHERE, "wait": "500"}
    answer = server.get("/api/changes", params={**params, "from": str(start)}, token=hostile)
    assert answer.status_code == 200, answer.text
    assert answer.json()["changes"] == [] and answer.json()["next"] == start


def test_a_held_filtered_answer_is_made_on_its_owners_budget(server: Server, hostile: str) -> None:
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    params = {"db": "demo", "table": "docs", "format": "json", "where": WHERE, "squash": "1"}
    params["from"] = str(_durable(server))
    thread, found = _in_thread(server, params, hostile)
    time.sleep(0.3)  # held before the commit
    docs = _write_docs(server)
    time.sleep(1.0)  # the hold is over: its filter runs now
    _victim_keeps_going(server, victim, 3)
    thread.join(60)
    _refused_with_the_timeout(found)
    victim.close()
    assert server.rows("SELECT count(*) AS n FROM docs") == [[docs]]
    # A held answer whose filter is quick is the squashed answer, as without a filter.
    params["where"] = "id < 0"
    params["from"] = str(_durable(server))
    answer = server.get("/api/changes", params=params, token=hostile)
    assert answer.status_code == 200, answer.text
    assert answer.json()["changes"] == []
    assert "Traceback" not in server.log.read_text()


def test_a_live_query_over_the_timeout_answers_400_though_its_wait_ends_first(
    server: Server, hostile: str
) -> None:
    """The same for a live query's long poll: the commit's re-run (the LIKE over each new
    row) is still going when the wait ends; the answer waits for it and is the 400."""
    for table in (f"notes{n}" for n in range(TRIES)):  # a new query each try
        server.sql(f"CREATE TABLE {table} (id INT PRIMARY KEY, body STRING)")
        query = f"SUBSCRIBE SELECT id FROM {table} WHERE {WHERE}"
        first = server.get("/api/subscribe", params={"db": "demo", "query": query}, token=hostile)
        assert first.status_code == 200, first.text
        ident = dict(line.split(": ", 1) for line in first.text.splitlines() if ": " in line)["id"]
        params = {"db": "demo", "query": query, "id": ident, "wait": str(WAIT_MS)}
        thread, found = _in_thread(server, params, hostile, "/api/subscribe")
        time.sleep(0.3)  # parked before the commit
        rows = ", ".join(f"({n}, '{TEXT}')" for n in range(1, ROWS + 1))
        server.sql(f"INSERT INTO {table} VALUES {rows}")
        in_time = _within_the_wait(found)
        thread.join(60)
        if in_time:
            break
    else:
        pytest.fail(f"no commit acknowledged within the wait in {TRIES} tries")
    _refused_with_the_timeout(found)
    assert 0.5 < float(found["seconds"]) < 10 * TIMEOUT_MS / 1000
    assert server.rows(f"SELECT count(*) AS n FROM {table}") == [[ROWS]]
    # A quiet one still answers nothing new at its wait: the id to ask again with.
    quiet_query = "SUBSCRIBE SELECT id FROM ticks WHERE id < 0"
    quiet = server.get("/api/subscribe", params={"db": "demo", "query": quiet_query}, token=hostile)
    assert quiet.status_code == 200, quiet.text
    ident = dict(line.split(": ", 1) for line in quiet.text.splitlines() if ": " in line)["id"]
    params = {"db": "demo", "query": quiet_query, "id": ident, "wait": "300"}
    started = time.monotonic()
    again = server.get("/api/subscribe", params=params, token=hostile)
    assert again.status_code == 200, again.text
    assert time.monotonic() - started >= 0.3
    assert "event: rows" not in again.text and f"id: {ident}" in again.text


def test_the_query_a_live_querys_request_runs_itself_is_within_the_timeout(
    server: Server, hostile: str
) -> None:
    """The one query a live query's request may run itself is within the statement timeout:
    a snapshot, and the re-run of a request whose id a commit has passed already."""
    server.sql("CREATE TABLE memos (id INT PRIMARY KEY, body STRING)")
    query = f"SUBSCRIBE SELECT id FROM memos WHERE {WHERE}"
    params = {"db": "demo", "query": query}
    first = server.get("/api/subscribe", params=params, token=hostile)
    assert first.status_code == 200, first.text  # no rows yet: at once
    ident = dict(line.split(": ", 1) for line in first.text.splitlines() if ": " in line)["id"]
    rows = ", ".join(f"({n}, '{TEXT}')" for n in range(1, ROWS + 1))
    server.sql(f"INSERT INTO memos VALUES {rows}")
    for more in ({"id": ident, "wait": "0"}, {"id": ident, "wait": "5000"}, {}):
        answer = server.get("/api/subscribe", params={**params, **more}, token=hostile, timeout=120)
        _refused_with_the_timeout({"answer": answer})

"""One user's costly waiting work holds nobody else (spec: stream, changes and subscribe, on
the waiter's own budget).

A READ user's `where=` filter (a LIKE of an 8 KB pattern over a 300 KB text: seconds of
work per row without a deadline) and a live query's re-run (in full, or of the changed time
buckets) run on that user's share of the waiting room's pool, within the statement timeout:
the filter's stream ends with a `reset` after a comment saying why, a long poll and a live
query answer the timeout's 400, and meanwhile another user's stream and long poll get their
events within a few seconds, `/health` answers, and nothing committed changes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
import requests

from tests.http.conftest import Server, timed_server
from tests.http.stream_client import open_stream
from tests.http.victims import tick_while

TIMEOUT_MS = 500
TEXT = ("a" * 6998 + "bb") * 43  # 301 KB: runs of `a` shorter than the piece
PATTERN = "%" + "a_" * 4000 + "%"  # 8 KB; no match: every candidate is tried
WHERE = f"body LIKE '{PATTERN}'"
LIVELY_SECONDS = 3.0  # a victim's event, or /health, within this while the hostile work runs


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with timed_server(tmp_path_factory.mktemp("isolation"), TIMEOUT_MS) as running:
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        running.sql("CREATE USER hostile")
        running.sql("GRANT READ ON DATABASE demo TO hostile")
        yield running


@pytest.fixture(scope="module")
def hostile(server: Server) -> str:
    return server.new_token("hostile")


def _write_doc(server: Server, ident: int) -> None:
    server.sql(f"INSERT INTO docs VALUES ({ident}, '{TEXT}')")


def _health_answers(server: Server) -> None:
    started = time.monotonic()
    answer = server.get("/health", token=None, timeout=LIVELY_SECONDS)
    assert answer.status_code == 200
    assert time.monotonic() - started < LIVELY_SECONDS


def _nothing_changed(server: Server, docs: int) -> None:
    assert server.rows("SELECT count(*) AS n, min(length(body)) AS l FROM docs") == [
        [docs, len(TEXT)]
    ]
    assert "Traceback" not in server.log.read_text()


def _next_id(server: Server, table: str) -> int:
    return int(server.rows(f"SELECT coalesce(max(id), 0) AS m FROM {table}")[0][0]) + 1


def test_a_costly_stream_filter_ends_with_a_reset_and_holds_no_other_stream(
    server: Server, hostile: str
) -> None:
    victim = open_stream(server, table="ticks")
    assert victim.take(1)[0]["event"] == "ready"
    attacker = open_stream(server, table="docs", where=WHERE, token=hostile, read_timeout=30)
    assert attacker.status == 200
    assert attacker.take(1)[0]["event"] == "ready"
    docs = _next_id(server, "docs")
    _write_doc(server, docs)
    first = _next_id(server, "ticks")
    for n in range(first, first + 5):
        started = time.monotonic()
        server.sql(f"INSERT INTO ticks VALUES ({n}, {n})")
        event = victim.take(1)[0]
        assert event["event"] == "change" and event["data"]["row"]["id"] == n
        assert time.monotonic() - started < LIVELY_SECONDS
        _health_answers(server)
    reset = attacker.next_event()
    assert reset is not None and reset["event"] == "reset" and reset["data"] == {}
    assert any("statement_timeout_ms" in c for c in attacker.comments), attacker.comments
    assert attacker.next_event() is None  # then the stream ends
    victim.close()
    _nothing_changed(server, docs)


def _get_later(
    server: Server, found: dict[str, requests.Response], name: str, **kw
) -> threading.Thread:
    """A GET in a thread of its own (a long poll), its answer put in `found[name]`."""

    def run() -> None:
        found[name] = server.get(**kw)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _durable(server: Server) -> int:
    answer = server.get(
        "/api/changes", params={"db": "demo", "table": "ticks", "format": "json", "limit": "1"}
    )
    assert answer.status_code == 200, answer.text
    return int(answer.json()["durable_lsn"])


def _victim_long_polls_answer(server: Server, count: int) -> None:
    """A long poll of another user gets each of `count` commits within LIVELY_SECONDS."""
    for _ in range(count):
        n = _next_id(server, "ticks")
        got: dict[str, requests.Response] = {}
        params = {"db": "demo", "table": "ticks", "format": "json", "wait": "10000"}
        params["from"] = str(_durable(server))
        victim = _get_later(server, got, "victim", path="/api/changes", params=params)
        time.sleep(0.2)  # parked before the commit
        started = time.monotonic()
        server.sql(f"INSERT INTO ticks VALUES ({n}, {n})")
        victim.join(10)
        answer = got["victim"]
        assert answer.status_code == 200, answer.text
        assert [c["row"]["id"] for c in answer.json()["changes"]] == [n]
        assert time.monotonic() - started < LIVELY_SECONDS
        _health_answers(server)


def test_a_costly_long_poll_filter_answers_the_timeout_and_holds_no_other_long_poll(
    server: Server, hostile: str
) -> None:
    found: dict[str, requests.Response] = {}
    params = {"db": "demo", "table": "docs", "format": "json", "where": WHERE, "wait": "20000"}
    params["from"] = str(_durable(server))
    attacker = _get_later(
        server, found, "hostile", path="/api/changes", params=params, token=hostile
    )
    time.sleep(0.5)  # parked before the commit
    docs = _next_id(server, "docs")
    _write_doc(server, docs)
    _victim_long_polls_answer(server, 3)
    attacker.join(30)
    refused = found["hostile"]
    assert refused.status_code == 400, refused.text
    assert "statement_timeout_ms" in refused.json()["error"]
    _nothing_changed(server, docs)


def test_a_costly_live_query_rerun_answers_the_timeout_and_holds_no_other_long_poll(
    server: Server, hostile: str
) -> None:
    server.sql("CREATE TABLE notes (id INT PRIMARY KEY, body STRING)")
    query = f"SUBSCRIBE SELECT id FROM notes WHERE {WHERE} ORDER BY id LIMIT 5"
    params = {"db": "demo", "query": query, "offsets": "true", "wait": "0"}
    snapshot = server.get("/api/subscribe", params=params, token=hostile)  # an empty table
    assert snapshot.status_code == 200, snapshot.text
    asked = next(line[4:] for line in snapshot.text.splitlines() if line.startswith("id: "))
    found: dict[str, requests.Response] = {}
    waiting = {**params, "wait": "20000", "id": asked}
    attacker = _get_later(
        server, found, "hostile", path="/api/subscribe", params=waiting, token=hostile
    )
    time.sleep(0.5)  # parked before the commit
    server.sql(f"INSERT INTO notes VALUES (1, '{TEXT}')")  # its re-run runs past the timeout
    _victim_long_polls_answer(server, 3)
    attacker.join(30)
    refused = found["hostile"]
    assert refused.status_code == 400, refused.text
    assert "statement_timeout_ms" in refused.json()["error"]
    assert server.rows("SELECT count(*) AS n, min(length(body)) AS l FROM notes") == [
        [1, len(TEXT)]
    ]


def test_a_costly_bucketed_live_query_rerun_answers_the_timeout_and_holds_no_other_long_poll(
    server: Server, hostile: str
) -> None:
    # Keyed, without before-images, grouped by minute: not maintained, so a commit re-runs
    # the buckets it changed; the WHERE of that re-run is the hostile user's costly work.
    server.sql(
        "CREATE TABLE notes_ts (time TIMESTAMP, id INT, body STRING, PRIMARY KEY (id, time))"
        " TIMESERIES(time)"
    )
    server.sql("INSERT INTO notes_ts VALUES ('2026-01-01T00:00:00', 0, 'short')")
    query = (
        "SUBSCRIBE SELECT date_trunc('minute', time) AS m, count(*) AS n FROM notes_ts"
        f" WHERE {WHERE} GROUP BY m"
    )
    params = {"db": "demo", "query": query, "wait": "0"}
    snapshot = server.get("/api/subscribe", params=params, token=hostile)
    assert snapshot.status_code == 200, snapshot.text
    assert '"maintained":false' in snapshot.text.replace(" ", ""), snapshot.text
    asked = next(line[4:] for line in snapshot.text.splitlines() if line.startswith("id: "))
    found: dict[str, requests.Response] = {}
    waiting = {**params, "wait": "20000", "id": asked}
    attacker = _get_later(
        server, found, "hostile", path="/api/subscribe", params=waiting, token=hostile
    )
    server.sql("DELETE FROM ticks")  # `tick_while` numbers its ticks from 1
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    time.sleep(0.5)  # parked before the commit
    # Its bucket's re-run reads these rows: seconds each, past the statement timeout.
    rows = ", ".join(f"('2026-01-01T00:00:3{n}', {n}, '{TEXT}')" for n in (1, 2, 3))
    server.sql(f"INSERT INTO notes_ts VALUES {rows}")
    tick_while(server, victim, attacker, LIVELY_SECONDS)  # each tick's event comes meanwhile
    victim.close()
    _victim_long_polls_answer(server, 2)
    attacker.join(30)
    refused = found["hostile"]
    assert refused.status_code == 400, refused.text
    assert "statement_timeout_ms" in refused.json()["error"]
    assert server.rows("SELECT count(*) AS n, max(length(body)) AS l FROM notes_ts") == [
        [4, len(TEXT)]
    ]

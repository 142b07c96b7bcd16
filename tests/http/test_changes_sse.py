"""GET /api/changes as server-sent events, read by a real SSE client (requests-sse).

- An EventSource follows hundreds of commits, asking again with `Last-Event-ID` after every
  answer and across a server restart on the same port: every change arrives once, in order.
- A change reaches a reader that waits for it, long before its wait would end.
- `wait=0` answers at once with nothing new.
- At most a quarter of the HTTP threads wait: with `--threads 4` one reader waits, a second
  waiting request answers at once with nothing, and /exec still answers.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import requests
from requests_sse import EventSource, MessageEvent

from tests.http.conftest import Server, free_port, start_server

WAIT_MS = 20_000  # a long wait: an answer well before it ends came because of a commit


def token_of(server: Server) -> str:
    return (server.data / "admin.token").read_text().strip()


def auth(server: Server) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_of(server)}"}


def exec_sql(server: Server, sql: str, db: str = "demo") -> dict[str, Any]:
    answer = requests.post(
        server.url + "/exec",
        params={"db": db},
        data=sql.encode(),
        headers=auth(server),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def sse_events(body: bytes) -> list[dict[str, str]]:
    """The events of an event-stream body (id, event, data); UTF-8 as the format says."""
    events = []
    for block in body.decode("utf-8").split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value
        if "data" in fields:
            events.append(fields)
    return events


class QuickEventSource(EventSource):
    """requests-sse's EventSource, asking again after 50 ms instead of the server's 1 s.

    The client doubles its reconnection time after each answer; the test only shortens the
    pause, the protocol (Last-Event-ID, retry) is the client's own.
    """

    def _process_field(self, field_name: str, field_value: str) -> None:
        super()._process_field(field_name, field_value)
        self._reconnection_time = min(self._reconnection_time, timedelta(milliseconds=50))


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def running(data: Path) -> Iterator[list[Server]]:
    """A server on a port of its own (a restart keeps it); the list holds the current one."""
    port = free_port()
    holder = [start_server(data, "--port", str(port))]
    try:
        yield holder
    finally:
        code = holder[0].stop()
        assert code == 0, holder[0].log.read_text()[-3000:]


def test_event_source_follows_hundreds_of_commits_across_a_restart(
    running: list[Server],
) -> None:
    server = running[0]
    exec_sql(server, "CREATE TABLE ev (id INT PRIMARY KEY, n INT, s STRING)")
    url = server.url + "/api/changes?table=ev&db=demo&wait=3000"
    received: list[dict[str, Any]] = []
    event_ids: list[str] = []
    target = [10**9]
    failure: list[BaseException] = []
    opened: list[float] = []

    def consume() -> None:
        try:
            with QuickEventSource(
                url,
                headers=auth(server),
                timeout=30,
                max_connect_retry=60,
                reconnection_time=timedelta(milliseconds=50),
                on_open=lambda: opened.append(time.monotonic()),
            ) as source:
                deadline = time.monotonic() + 120
                event: MessageEvent
                for event in source:
                    if event.type == "change":
                        received.append(json.loads(event.data or ""))
                        event_ids.append(event.last_event_id)
                    upserts = sum(1 for c in received if c["op"] == "upsert")
                    if upserts >= target[0] or time.monotonic() > deadline:
                        return
        except BaseException as error:  # reported by the test thread
            failure.append(error)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    expected_ids: list[int] = []
    next_id = 0
    for commit in range(300):
        if commit == 150:
            code = running[0].stop()
            assert code == 0
            running[0] = start_server(server.data, "--port", str(server.url.rsplit(":", 1)[1]))
            assert running[0].url == server.url
        rows = 1 + commit % 3
        values = ", ".join(f"({next_id + k}, {commit}, 'ñ{commit}')" for k in range(rows))
        expected_ids += range(next_id, next_id + rows)
        next_id += rows
        exec_sql(running[0], f"INSERT INTO ev VALUES {values}")
    target[0] = len(expected_ids)
    consumer.join(150)
    assert not consumer.is_alive(), f"the reader stopped at {len(received)} changes"
    assert not failure, failure
    assert len(opened) >= 3, "the client should have asked again, also after the restart"
    upserts = [c for c in received if c["op"] == "upsert"]
    assert [c["row"]["id"] for c in upserts] == expected_ids  # none missed, none twice
    assert all(c["row"]["s"] == f"ñ{c['row']['n']}" for c in upserts)
    positions = [(c["lsn"], c["seq"]) for c in received]
    assert positions == sorted(set(positions))
    assert received[0]["op"] == "ddl" and received[0]["lsn"] == 1
    # id: is sent on the last change of each transaction, so a reconnection never splits one
    for change, seen_id, after in zip(received, event_ids, [*received[1:], None], strict=True):
        if after is None or after["lsn"] != change["lsn"]:
            assert seen_id == str(change["lsn"])


def start_waiting(server: Server, query: str) -> tuple[threading.Thread, dict[str, Any]]:
    """A GET that may wait, in a thread; the dict gets its answer and how long it took."""
    out: dict[str, Any] = {}

    def run() -> None:
        started = time.monotonic()
        try:
            out["answer"] = requests.get(
                server.url + query, headers=auth(server), timeout=WAIT_MS / 1000 + 30
            )
        except requests.RequestException as error:
            out["error"] = error
        out["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def durable_lsn(server: Server, table: str) -> int:
    answer = requests.get(
        server.url + "/api/changes",
        params={"table": table, "format": "json", "limit": "1"},
        headers=auth(server),
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["durable_lsn"]


def test_a_change_reaches_a_waiting_reader_quickly(running: list[Server]) -> None:
    server = running[0]
    exec_sql(server, "CREATE TABLE w (id INT PRIMARY KEY, n INT)")
    lsn = durable_lsn(server, "w")
    for fmt in ("sse", "json"):
        thread, out = start_waiting(
            server, f"/api/changes?table=w&from={lsn}&wait={WAIT_MS}&format={fmt}"
        )
        time.sleep(0.5)
        assert thread.is_alive(), f"the reader did not wait: {out}"  # nothing new: it waits
        exec_sql(server, f"INSERT INTO w VALUES ({lsn}, 1)")
        thread.join(WAIT_MS / 1000 + 30)
        assert out["answer"].status_code == 200, out
        # The commit ended the wait: well before the 20 s the reader was ready to wait.
        assert out["seconds"] < WAIT_MS / 1000 / 2, out
        if fmt == "sse":
            events = sse_events(out["answer"].content)
            changes = [json.loads(e["data"]) for e in events if e.get("event") == "change"]
            assert events[-1]["event"] == "position" and events[-1]["id"] == str(lsn + 1)
        else:
            changes = out["answer"].json()["changes"]
        assert [(c["lsn"], c["op"], c["row"]) for c in changes] == [
            (lsn + 1, "upsert", {"id": lsn, "n": 1})
        ]
        lsn += 1


def test_wait_zero_answers_at_once(running: list[Server]) -> None:
    server = running[0]
    exec_sql(server, "CREATE TABLE z (id INT PRIMARY KEY)")
    exec_sql(server, "INSERT INTO z VALUES (1)")
    lsn = durable_lsn(server, "z")
    started = time.monotonic()
    answer = requests.get(
        server.url + "/api/changes",
        params={"table": "z", "from": str(lsn), "wait": "0"},
        headers=auth(server),
        timeout=30,
    )
    assert answer.status_code == 200
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(answer.content)
    assert [e.get("event") for e in events] == ["position"]
    assert events[0]["id"] == str(lsn)
    assert json.loads(events[0]["data"]) == {"next": lsn, "more": False}
    # JSON (its default wait is 0) and wait=0 with a Last-Event-ID header
    answer = requests.get(
        server.url + "/api/changes",
        params={"table": "z", "format": "json"},
        headers={**auth(server), "Last-Event-ID": str(lsn)},
        timeout=30,
    )
    body = answer.json()
    assert (body["changes"], body["next"], body["more"]) == ([], lsn, False)
    assert time.monotonic() - started < 10  # nothing waited for a commit
    # wait=0 with something new answers it at once too
    answer = requests.get(
        server.url + "/api/changes",
        params={"table": "z", "from": str(lsn - 1), "wait": "0"},
        headers=auth(server),
        timeout=30,
    )
    changes = [json.loads(e["data"]) for e in sse_events(answer.content) if e["event"] == "change"]
    assert [c["row"] for c in changes] == [{"id": 1}]


def test_at_most_a_quarter_of_the_threads_wait(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", "--threads", "4")
    try:
        exec_sql(server, "CREATE TABLE q (id INT PRIMARY KEY)")
        lsn = durable_lsn(server, "q")
        first, first_out = start_waiting(server, f"/api/changes?table=q&from={lsn}&wait={WAIT_MS}")
        time.sleep(0.5)
        assert first.is_alive(), first_out  # the one wait slot of 4 threads is taken
        second, second_out = start_waiting(
            server, f"/api/changes?table=q&from={lsn}&wait={WAIT_MS}"
        )
        second.join(WAIT_MS / 1000 / 2)
        assert not second.is_alive(), "a second reader waited although a quarter already does"
        events = sse_events(second_out["answer"].content)
        assert [e["event"] for e in events] == ["position"]  # at once, with nothing
        assert events[0]["id"] == str(lsn)
        # /exec still answers while a reader waits
        assert exec_sql(server, "SELECT 1 AS one")["dataset"] == [[1]]
        assert first.is_alive()
        exec_sql(server, "INSERT INTO q VALUES (7)")
        first.join(WAIT_MS / 1000)
        assert not first.is_alive()
        changes = [
            json.loads(e["data"])
            for e in sse_events(first_out["answer"].content)
            if e["event"] == "change"
        ]
        assert [c["row"] for c in changes] == [{"id": 7}]
        # the slot is free again: the next reader waits
        again, again_out = start_waiting(
            server, f"/api/changes?table=q&from={lsn + 1}&wait={WAIT_MS}"
        )
        time.sleep(0.5)
        assert again.is_alive(), again_out
        exec_sql(server, "INSERT INTO q VALUES (8)")
        again.join(WAIT_MS / 1000)
        assert not again.is_alive()
    finally:
        assert server.stop() == 0

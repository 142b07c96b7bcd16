"""Resuming the event stream, read by a real SSE client (requests-sse).

- Within the replay window the missed events come; past it, or past the kept log, `reset`
  then `ready`; a quiet stream never resets for being quiet.
- An EventSource following a writer's commits across a graceful restart and a SIGKILL of
  the server (same port, reconnecting by itself with `Last-Event-ID`) gets every change
  exactly once, in commit order.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from requests_sse import EventSource, InvalidStatusCodeError, MessageEvent

from tests.http.conftest import Server, free_port, start_server

REPLAY = 1.0
PAD = "x" * 1500


class QuickEventSource(EventSource):
    """requests-sse's EventSource, reconnecting after 50 ms instead of the server's 1 s."""

    def _process_field(self, field_name: str, field_value: str) -> None:
        super()._process_field(field_name, field_value)
        self._reconnection_time = min(self._reconnection_time, timedelta(milliseconds=50))


def start(folder: Path, conf: str = "", port: int = 0) -> Server:
    data = folder / "data"
    data.mkdir(exist_ok=True)
    (data / "kdb.conf").write_text(conf)
    server = start_server(data, "--port", str(port))
    server.token = server.token or (data / "admin.token").read_text().strip()  # a restart
    return server


def first_events(server: Server, count: int, **headers: str) -> list[MessageEvent]:
    """The first `count` events of a new stream of `demo`."""
    events = []
    with EventSource(
        server.url + "/stream/changes",
        headers={"Authorization": f"Bearer {server.token}", **headers},
        timeout=10,
    ) as source:
        for event in source:
            events.append(event)
            if len(events) == count:
                break
    return events


def test_replay_window_and_reset(tmp_path: Path) -> None:
    server = start(tmp_path, f"stream_replay_s = {REPLAY}\n")
    try:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        (ready,) = first_events(server, 1)
        assert ready.type == "ready" and ready.last_event_id == "1"
        server.sql("INSERT INTO t VALUES (1)")
        change, ready = first_events(server, 2, **{"Last-Event-ID": "1"})
        assert (change.type, change.last_event_id, ready.type) == ("change", "2.1", "ready")
        time.sleep(REPLAY + 0.5)  # quiet past the window: nothing missed, no reset
        (ready,) = first_events(server, 1, **{"Last-Event-ID": "2.1"})
        assert (ready.type, ready.last_event_id) == ("ready", "2")
        server.sql("INSERT INTO t VALUES (2)")
        time.sleep(REPLAY + 0.5)  # the missed commit is now older than the window
        reset, ready = first_events(server, 2, **{"Last-Event-ID": "2.1"})
        assert (reset.type, reset.last_event_id) == ("reset", "3")
        assert (ready.type, ready.last_event_id) == ("ready", "3")
    finally:
        assert server.stop() == 0


def test_a_resume_point_older_than_the_kept_log_resets(tmp_path: Path) -> None:
    server = start(tmp_path)
    try:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, pad STRING)")
        server.sql("ALTER DATABASE demo SET WAL_ARCHIVE = '64KB'")
        server.sql(f"INSERT INTO t VALUES (0, '{PAD}')")
        for first in range(1, 400, 10):
            values = ", ".join(f"({n}, '{PAD}')" for n in range(first, first + 10))
            server.sql(f"INSERT INTO t VALUES {values}")
        deadline = time.monotonic() + 20
        while server.get("/api/stats").json()["databases"]["demo"]["oldest_lsn"] <= 3:
            assert time.monotonic() < deadline, "the log was not trimmed"
            time.sleep(0.1)
        reset, ready = first_events(server, 2, **{"Last-Event-ID": "3.1"})
        assert (reset.type, ready.type) == ("reset", "ready")
        assert reset.last_event_id == ready.last_event_id
        assert int(ready.last_event_id) >= 43
    finally:
        assert server.stop() == 0


@pytest.mark.parametrize("stop", ["graceful", "crash"])
def test_every_change_once_across_a_restart(tmp_path: Path, stop: str) -> None:
    port = free_port()
    conf = "stream_heartbeat_s = 0.5\n"
    server = start(tmp_path, conf, port)
    servers = [server]
    total = 300
    try:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        token = server.token
        received: list[int] = []
        ids: list[str] = []
        failure: list[BaseException] = []

        def follow(deadline: float) -> bool:
            """Read until every change came (True), or the server refused a reconnect."""
            last = ids[-1] if ids else None
            with QuickEventSource(
                server.url + "/stream/changes",
                headers={"Authorization": f"Bearer {token}"},
                timeout=10,
                max_connect_retry=200,
                reconnection_time=timedelta(milliseconds=50),
                latest_event_id=last,
            ) as source:
                for event in source:
                    if event.type == "change":
                        received.append(json.loads(event.data)["row"]["id"])
                        ids.append(event.last_event_id)
                    if len(set(received)) >= total or time.monotonic() > deadline:
                        return True
            return False

        def read() -> None:
            deadline = time.monotonic() + 120
            try:
                while time.monotonic() < deadline:
                    try:
                        if follow(deadline):
                            return
                    except InvalidStatusCodeError as refused:
                        # A 503 while the server shuts down: an EventSource gives up, so a
                        # page connects again after Retry-After, with the last id it got.
                        assert refused.status_code == 503, refused
                        time.sleep(0.2)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                failure.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.5)
        for n in range(total):
            if n == total // 2:
                if stop == "crash":
                    servers[-1].process.send_signal(signal.SIGKILL)
                    servers[-1].process.wait(10)
                else:
                    assert servers[-1].stop() == 0
                servers.append(start(tmp_path, conf, port))
            insert_once(servers[-1], n)
        reader.join(150)
        assert not failure, failure
        assert received == list(range(total)), "a change missed, repeated or out of order"
        lsns = [int(i.split(".")[0]) for i in ids]
        assert lsns == sorted(lsns) and len(set(ids)) == len(ids)
    finally:
        for running in servers:
            running.stop()


def insert_once(server: Server, n: int) -> None:
    """Insert row n, asking again while the server restarts; a retry of a commit that
    went through before the crash finds the row there."""
    deadline = time.monotonic() + 30
    while True:
        try:
            answer = server.exec(f"INSERT INTO t VALUES ({n})")
        except requests.ConnectionError:
            answer = None
        if answer is not None and answer.status_code == 200:
            return
        if answer is not None and "duplicate" in answer.text:
            return
        assert time.monotonic() < deadline, answer.text if answer is not None else "down"
        time.sleep(0.05)

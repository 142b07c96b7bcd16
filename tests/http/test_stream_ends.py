"""How event streams end, and when none opens: max age, ticket expiry, capacity, shutdown.

A server of this module's own with short settings in its kdb.conf: streams end after
`stream_max_age_s`, tickets expire after `stream_ticket_ttl_s`, and `stream_capacity` is 3.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from tests.http.conftest import Server, running_server, start_server
from tests.http.stream_client import open_stream

MAX_AGE = 1.5
TICKET_TTL = 1.0
CAPACITY = 3


def _start(tmp_path_factory: pytest.TempPathFactory, name: str, conf: str) -> Server:
    data = tmp_path_factory.mktemp(name) / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(conf)
    return start_server(data)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = _start(
        tmp_path_factory,
        "ends",
        f"stream_max_age_s = {MAX_AGE}\nstream_ticket_ttl_s = {TICKET_TTL}\n"
        f"stream_capacity = {CAPACITY}\nstreams_per_token = 10\nstream_heartbeat_s = 0.2\n",
    )
    try:
        yield running
    finally:
        assert running.stop() == 0, running.log.read_text()[-3000:]


def test_a_stream_ends_at_its_max_age_and_resumes(server: Server) -> None:
    server.sql("CREATE TABLE IF NOT EXISTS a (id INT PRIMARY KEY)")
    stream = open_stream(server)
    ready = stream.take(1)[0]
    started = time.monotonic()
    assert stream.until_end(MAX_AGE + 3) == []
    assert MAX_AGE - 0.1 <= time.monotonic() - started <= MAX_AGE + 1.5
    assert any("most age" in c for c in stream.comments)
    server.sql("INSERT INTO a VALUES (1)")
    again = open_stream(server, headers={"Last-Event-ID": ready["id"]})
    change, ready_again = again.take(2)
    assert change["event"] == "change" and ready_again["event"] == "ready"
    again.close()


def test_a_ticket_expires(server: Server) -> None:
    ticket = server.post("/stream/tickets").json()["ticket"]
    time.sleep(TICKET_TTL + 0.2)
    late = server.get("/stream/changes", params={"ticket": ticket}, token=None)
    assert late.status_code == 401 and "expired" in late.json()["error"]


def test_capacity_full_is_a_503_with_retry_after(server: Server) -> None:
    streams = [open_stream(server) for _ in range(CAPACITY)]
    assert all(s.status == 200 for s in streams)
    for stream in streams:
        stream.take(1)
    full = server.get("/stream/changes")
    assert full.status_code == 503 and full.headers["Retry-After"]
    assert "stream_capacity" in full.json()["error"]
    assert server.sql("SELECT 1")["dataset"] == [[1]]  # the workers are free
    for stream in streams:
        stream.close()


def test_shutdown_ends_streams_after_their_last_event(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    running = _start(tmp_path_factory, "shutdown", "stream_heartbeat_s = 0.2\n")
    try:
        running.sql("CREATE TABLE s (id INT PRIMARY KEY)")
        stream = open_stream(running)
        stream.take(1)
        running.sql("INSERT INTO s VALUES (1)")
        ended: list[list[dict]] = []
        reader = threading.Thread(target=lambda: ended.append(stream.until_end(20)))
        reader.start()
        time.sleep(0.3)
        assert running.stop() == 0
        reader.join(25)
        assert [e["id"] for e in ended[0]] == ["2.1"]
        assert any("shutting down" in c for c in stream.comments)
    finally:
        running.stop()


def test_with_dev_streams_need_no_token_and_tickets_still_work_once(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    data = tmp_path_factory.mktemp("dev") / "data"
    with running_server(data, "--dev") as running:
        ticket = running.post("/stream/tickets", token=None).json()["ticket"]
        stream = open_stream(running, token=None, ticket=ticket)
        assert stream.take(1)[0]["event"] == "ready"
        time.sleep(1.2)  # the sweep looks at open streams twice a second
        running.sql("CREATE TABLE d (id INT PRIMARY KEY)", token=None)
        assert stream.take(1)[0]["data"]["op"] == "schema"
        stream.close()
        again = running.get("/stream/changes", params={"ticket": ticket}, token=None)
        assert again.status_code == 401

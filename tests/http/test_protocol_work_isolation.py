"""A user's pipelined protocol session and another's COPY FROM STDIN, each within its limits,
are their users' long work and take turns (spec: pgwire, turns): meanwhile a third user's
event stream gets every commit, and `/health` and a protocol session opened before answer,
within a generous bound; the pipeline's answers all come, in order, the COPY commits
exactly its rows, and nothing else committed changes.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.http.stream_client import open_stream
from tests.pgwire.attack import (
    MessageReader,
    PgServer,
    assert_alive,
    logged_in,
    pg_server,
    query_message,
)

WIDE = "x" * 14_000
# Each query is 14 KB of text answered with 10 rows carrying it back (140 KB): 200 of them
# are 28 MB of answers, well past the 1 MB a connection may leave unsent.
PIPELINED_SQL = f"SELECT id, '{WIDE}' AS pad FROM small WHERE id < 10 ORDER BY id"
PIPELINED = 200
COPY_MESSAGES = 100
COPY_LINES = 256  # lines of 1 KB a CopyData message: 25,600 rows in all
LIVELY_SECONDS = 5.0  # a victim's event, /health, its session: within this (liveness only)
TICKS = 5


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    folder: Path = tmp_path_factory.mktemp("protocol-work")
    with pg_server(folder) as server:
        server.http.sql("CREATE TABLE small (id INT PRIMARY KEY, v INT)")
        server.http.sql("INSERT INTO small SELECT g, g FROM generate_series(0, 19) g")
        server.http.sql("CREATE TABLE ticks (id INT PRIMARY KEY)")
        server.http.sql("CREATE DATABASE own")
        server.http.sql("CREATE TABLE sink (id INT PRIMARY KEY, body STRING)", db="own")
        for user, grant in (
            ("piper", "READ ON DATABASE demo"),
            ("copier", "WRITE ON DATABASE own"),
            ("watcher", "READ ON DATABASE demo"),
        ):
            server.http.sql(f"CREATE USER {user}")
            server.http.sql(f"GRANT {grant} TO {user}")
        yield server


def _pipeline(sock: socket.socket, found: dict[str, object]) -> None:
    """Sends every query at once (from a thread of its own: the server stops reading while
    its answers wait), then reads every answer: the first column of each answer's rows."""
    sender = threading.Thread(
        target=sock.sendall, args=(query_message(PIPELINED_SQL) * PIPELINED,), daemon=True
    )
    sender.start()
    time.sleep(1.0)  # reads nothing meanwhile: the answers wait unsent, past the bound
    reader = MessageReader(sock)
    answers: list[list[int]] = []
    rows: list[int] = []
    while len(answers) < PIPELINED:
        kind, body = reader.next()
        if kind == b"D":
            (length,) = struct.unpack_from("!i", body, 2)
            rows.append(int(body[6 : 6 + length]))
        elif kind == b"Z":
            answers.append(rows)
            rows = []
    sender.join(30)
    found["pipeline"] = answers


def _copy(sock: socket.socket, found: dict[str, object]) -> None:
    """COPY FROM STDIN of COPY_MESSAGES CopyData messages sent as fast as the socket takes
    them; the answer's tag."""
    sock.sendall(query_message("COPY sink FROM STDIN"))
    reader = MessageReader(sock)
    while reader.next()[0] != b"G":
        pass
    ident = 0
    for _ in range(COPY_MESSAGES):
        lines = []
        for _ in range(COPY_LINES):
            ident += 1
            lines.append(f"{ident}\t{'c' * 1000}\n")
        sock.sendall(_message(b"d", "".join(lines).encode()))
    sock.sendall(_message(b"c", b""))
    found["copy"] = reader.until(b"C", 1)[0]
    reader.until(b"Z", 1)


def test_a_pipeline_and_a_copy_leave_other_users_their_events(pg: PgServer) -> None:
    http = pg.http
    victim = pg.connect()
    stream = open_stream(http, table="ticks", token=http.new_token("watcher"), read_timeout=30)
    assert stream.status == 200
    piper = logged_in(pg, "piper", http.new_token("piper"))
    copier = logged_in(pg, "copier", http.new_token("copier", db="own"), database="own")
    found: dict[str, object] = {}
    errors: list[BaseException] = []

    def run(work: Callable[[socket.socket, dict[str, object]], None], sock: socket.socket) -> None:
        try:
            work(sock, found)
        except BaseException as error:  # noqa: BLE001 - the test reports it
            errors.append(error)

    hostile = [
        threading.Thread(target=run, args=(_pipeline, piper), daemon=True),
        threading.Thread(target=run, args=(_copy, copier), daemon=True),
    ]
    for thread in hostile:
        thread.start()
    try:
        for tick in range(TICKS):
            committed = time.monotonic()
            assert http.exec(f"INSERT INTO ticks VALUES ({tick})").status_code == 200
            event = stream.next_event()
            while event is not None and event.get("event") != "change":
                event = stream.next_event()
            assert event is not None, stream.comments
            assert event["data"]["row"]["id"] == tick
            assert time.monotonic() - committed < LIVELY_SECONDS
            assert_alive(pg, victim, LIVELY_SECONDS)
        for thread in hostile:
            thread.join(120)
        assert not errors, errors
        assert not any(thread.is_alive() for thread in hostile)
    finally:
        stream.close()
        piper.close()
        copier.close()
    # Every pipelined query answered, in order, each with its 10 rows.
    assert found["pipeline"] == [list(range(10))] * PIPELINED
    rows = COPY_MESSAGES * COPY_LINES
    assert found["copy"] == f"COPY {rows}\0".encode()
    assert http.rows("SELECT count(*), min(id), max(id) FROM sink", db="own") == [[rows, 1, rows]]
    assert http.rows("SELECT count(*), sum(v) FROM small") == [[20, 190]]
    assert http.rows("SELECT id FROM ticks ORDER BY id") == [[t] for t in range(TICKS)]
    victim.close()

"""Write acknowledgements parked until the flush: answered after it, or with its failure."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from refimpl.engine.access import ADMIN
from refimpl.engine.files import Buffer, FileOps
from refimpl.engine.instance import Instance
from refimpl.engine.tracking.signals import CommitSignal
from refimpl.errors import WritesStopped
from refimpl.http.app import App, AppOptions
from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting.acknowledgements import acknowledge_when_durable
from refimpl.waiting.flusher import Flusher
from refimpl.waiting.room import WaitingRoom
from tests.http.conftest import pooled_server
from tests.observed_fsyncs import ObservedFsyncs
from tests.waits import eventually


def test_an_acknowledgement_goes_out_once_its_commit_is_durable(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path)
    room = WaitingRoom(to_response)
    flusher = Flusher(room.wake)
    instance.session().execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    session = instance.session(database="demo", principal=ADMIN, acknowledge_later=True)
    try:
        for n in range(5):
            session.execute(f"INSERT INTO t VALUES ({n})")
            database = instance.database("demo")
            lsn = session.durable_needed
            got = threading.Event()
            answers: list[Answer] = []
            parked = acknowledge_when_durable(room, flusher, database, lsn, Answer(b"ok"))

            def on_answer(
                answer: Answer, answers: list[Answer] = answers, got: threading.Event = got
            ) -> None:
                answers.append(answer)
                got.set()

            parked.on_ready(on_answer)
            assert got.wait(10)
            assert answers[0].body == b"ok" and database.log.durable_lsn >= lsn
    finally:
        session.close()
        room.close()
        flusher.close()
        instance.close()


class FailingLog:
    durable_lsn = 0


class FailingDatabase:
    """A database whose log cannot be flushed (a full or failed disk)."""

    name = "broken"

    def __init__(self) -> None:
        self.commits = CommitSignal()
        self.log = FailingLog()

    def wait_durable(self, lsn: int) -> None:
        raise WritesStopped("the log cannot be written: writes are stopped")


def test_a_failed_flush_answers_with_the_failure() -> None:
    room = WaitingRoom(to_response)
    flusher = Flusher(room.wake)
    got = threading.Event()
    answers: list[Answer] = []
    parked = acknowledge_when_durable(room, flusher, FailingDatabase(), 7, Answer(b"ok"))

    def on_answer(answer: Answer) -> None:
        answers.append(answer)
        got.set()

    parked.on_ready(on_answer)
    try:
        assert got.wait(10)
        assert answers[0].status_code == 503 and b"writes are stopped" in answers[0].body
    finally:
        room.close()
        flusher.close()


class KeptFsyncs(ObservedFsyncs):
    """`ObservedFsyncs` that keeps what was written, to tell whether some bytes were on
    disk at the last fsync of their file that returned."""

    def __init__(self) -> None:
        super().__init__(None)
        self.data: dict[int, bytearray] = {}

    def wrote(self, fd: int, buffers: Sequence[Buffer], count: int) -> None:
        super().wrote(fd, buffers, count)
        kept = self.data.setdefault(fd, bytearray())
        for data in buffers:
            taken = memoryview(data)[:count]
            kept += taken
            count -= len(taken)

    def on_disk(self, marker: bytes) -> bool:
        return any(marker in self.data[fd][:size] for fd, size in list(self.synced.items()))


WRITERS, PER_WRITER = 6, 40


@pytest.mark.parametrize("fail_after", [None, 6])
def test_no_exec_answer_leaves_before_its_record_is_on_disk(
    tmp_path: Path, fail_after: int | None
) -> None:
    # Writers over keep-alive connections, each INSERT parked until its flush: every 200 a
    # client reads is of a row whose record a returned fsync covered (its bytes made while
    # the flush ran, sent only after it); after a failed fsync nothing more is acknowledged,
    # and the writes it took down are answered with the error.
    files = KeptFsyncs()
    instance = Instance.open(tmp_path, files=files)
    token = instance.access.ensure_admin()
    assert token is not None
    instance.session("demo", ADMIN).execute("CREATE TABLE t (id BIGINT PRIMARY KEY, tag TEXT)")
    if fail_after is not None:
        files.fail_at = files.fsyncs + fail_after
    app = App(instance, AppOptions(threads=4))
    wrong: list[str] = []
    statuses: dict[int, list[int]] = {writer: [] for writer in range(WRITERS)}

    def write(writer: int, port: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "text/plain"}
        for n in range(PER_WRITER):
            tag = f"mark-{writer}-{n}-end"
            sql = f"INSERT INTO t VALUES ({writer * 1000 + n}, '{tag}')"
            connection.request("POST", "/exec", sql.encode(), headers)
            answer = connection.getresponse()
            answer.read()
            statuses[writer].append(answer.status)
            if answer.status == 200 and not files.on_disk(tag.encode()):
                wrong.append(f"{tag} answered before an fsync covered it")
        connection.close()

    try:
        with pooled_server(app) as server:
            port = server.server_address[1]
            writers = [threading.Thread(target=write, args=(w, port)) for w in range(WRITERS)]
            for thread in writers:
                thread.start()
            for thread in writers:
                thread.join(60)
    finally:
        app.begin_shutdown()
        instance.close()
    assert not wrong, wrong[:3]
    assert files.synced_writes > 0  # the flushes were the log's one call, write and sync
    every = [status for answers in statuses.values() for status in answers]
    assert len(every) == WRITERS * PER_WRITER
    if fail_after is None:
        assert set(every) == {200}
    else:
        assert 503 in every
        for answers in statuses.values():  # once refused, never acknowledged again
            refused = answers.index(503) if 503 in answers else len(answers)
            assert 200 not in answers[refused:]


class HeldFsyncs(FileOps):
    """A log's files whose fsyncs wait, once `held` is cleared, until it is set again."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.held.set()

    def fsync(self, fd: int) -> None:
        assert self.held.wait(30)
        super().fsync(fd)


def _answer_of(conn: socket.socket, buffered: bytearray) -> tuple[bytes, bytes]:
    """The next answer's status line and body; bytes after it stay in `buffered`."""
    while b"\r\n\r\n" not in buffered:
        buffered += conn.recv(65536)
    end = buffered.index(b"\r\n\r\n")
    head = bytes(buffered[:end])
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(buffered) < end + 4 + length:
        buffered += conn.recv(65536)
    body = bytes(buffered[end + 4 : end + 4 + length])
    del buffered[: end + 4 + length]
    return head.split(b"\r\n")[0], body


def test_what_a_client_does_while_its_acknowledgement_waits_comes_after_it(
    tmp_path: Path,
) -> None:
    # A request sent while its connection's write acknowledgement waits for the flush
    # (pipelined) is answered after the acknowledgement, in order, and a client that hangs
    # up meanwhile leaves the others served.
    files = HeldFsyncs()
    instance = Instance.open(tmp_path, files=files)
    token = instance.access.ensure_admin()
    assert token is not None
    instance.session("demo", ADMIN).execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
    app = App(instance, AppOptions(threads=4))

    def request(sql: str) -> bytes:
        head = f"POST /exec HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        return f"{head}Content-Length: {len(sql)}\r\n\r\n{sql}".encode()

    try:
        with pooled_server(app) as server:
            address = ("127.0.0.1", server.server_address[1])
            files.held.clear()
            leaving = socket.create_connection(address)
            leaving.sendall(request("INSERT INTO t VALUES (2)"))
            staying = socket.create_connection(address, timeout=30)
            staying.sendall(request("INSERT INTO t VALUES (1)"))
            assert eventually(lambda: app.waiting_room.parked_count() == 2)
            leaving.close()
            staying.sendall(request("SELECT count(*) AS n FROM t"))
            files.held.set()
            buffered = bytearray()
            status, body = _answer_of(staying, buffered)
            assert status == b"HTTP/1.1 200 OK" and b"INSERT" in body
            status, body = _answer_of(staying, buffered)
            assert status == b"HTTP/1.1 200 OK" and b'"dataset":[[2]]' in body
            staying.sendall(request("SELECT count(*) AS n FROM t"))
            assert b'"dataset":[[2]]' in _answer_of(staying, buffered)[1]
            staying.close()
    finally:
        app.begin_shutdown()
        instance.close()

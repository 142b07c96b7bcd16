"""Write acknowledgements parked until the flush: answered after it, or with its failure."""

from __future__ import annotations

import http.client
import threading
from pathlib import Path

import pytest

from refimpl.engine.access import ADMIN
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

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        count = super().write(fd, data)
        self.data.setdefault(fd, bytearray()).extend(memoryview(data)[:count])
        return count

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
    every = [status for answers in statuses.values() for status in answers]
    assert len(every) == WRITERS * PER_WRITER
    if fail_after is None:
        assert set(every) == {200}
    else:
        assert 503 in every
        for answers in statuses.values():  # once refused, never acknowledged again
            refused = answers.index(503) if 503 in answers else len(answers)
            assert 200 not in answers[refused:]

"""Write acknowledgements parked until the flush: answered after it, or with its failure."""

from __future__ import annotations

import threading
from pathlib import Path

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.tracking.signals import CommitSignal
from refimpl.errors import WritesStopped
from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting.acknowledgements import acknowledge_when_durable
from refimpl.waiting.flusher import Flusher
from refimpl.waiting.room import WaitingRoom


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

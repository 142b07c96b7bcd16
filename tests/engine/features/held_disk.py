"""A disk whose flush is held (`HeldDisk`), a connection over it (`connected`), a commit made
visible while its flush is held (`commit_held`), and a call on a thread of its own
(`in_thread`): what the tests of durability share (a commit visible and not yet durable,
then durable, or its log failed)."""

from __future__ import annotations

import errno
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from refimpl import Connection
from refimpl.engine.files import FileOps
from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import WritesStopped

SOON = 5.0  # seconds: what never blocks ends well within this
WHILE = 0.2  # seconds: how long something blocked is watched not to end
FIRST_TRADE = "INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 1510)"


class HeldDisk(FileOps):
    """Real files whose fsync waits, while `held`, until `release`; then fails if `fail`."""

    def __init__(self) -> None:
        self.open_gate = threading.Event()
        self.open_gate.set()
        self.fail = False

    def hold(self) -> None:
        self.open_gate.clear()

    def release(self, fail: bool = False) -> None:
        self.fail = fail
        self.open_gate.set()

    def fsync(self, fd: int) -> None:
        assert self.open_gate.wait(SOON * 4)
        if self.fail:
            raise OSError(errno.EIO, "the disk failed")
        super().fsync(fd)


def connected(tmp_path: Path, disk: HeldDisk, *statements: str) -> Iterator[Connection]:
    """A fixture's body: a connection to database demo, in a new data folder under
    `tmp_path` whose files are `disk`, once `statements` ran; at the end the disk is let go
    and the connection closed."""
    connection = Connection(Instance.open(tmp_path / "data", EngineOptions(), disk), "demo")
    for sql in statements:
        connection.execute(sql)
    yield connection
    disk.release()
    connection.close()


def commit_held(conn: Connection, disk: HeldDisk) -> tuple[int, threading.Thread]:
    """A trade committed (visible) whose flush is held: its LSN, and the writer's thread."""
    database = conn.instance.database("demo")
    before = database.applied_lsn
    disk.hold()
    writer = threading.Thread(
        target=lambda: ignore_failure(
            lambda: conn.execute(
                "INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 1530)"
            )
        ),
        daemon=True,
    )
    writer.start()
    ends = time.monotonic() + SOON
    while database.applied_lsn == before:
        assert time.monotonic() < ends, "the commit never became visible"
        time.sleep(0.001)
    assert database.log.durable_lsn < database.applied_lsn
    return database.applied_lsn, writer


def ignore_failure(run: Callable[[], object]) -> None:
    try:
        run()
    except WritesStopped:
        pass  # the writer's own answer when the flush fails


def in_thread(run: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """`run()` on a thread of its own: the thread, and what it gave or raised (once done)."""
    got: list[object] = []

    def body() -> None:
        try:
            got.append(run())
        except Exception as error:  # noqa: BLE001 - the test looks at it
            got.append(error)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, got

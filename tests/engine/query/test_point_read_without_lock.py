"""A point read by a table's key skips the state lock while no commit installs
(`point_read.read_without_lock`), and still answers only what one committed state held,
and only once it is durable."""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Iterator

import pytest

from refimpl import Connection
from refimpl.engine.query.point_read import point_plan, read_without_lock
from refimpl.sql import ast
from tests.engine.features.held_disk import SOON, WHILE, HeldDisk, connected, in_thread
from tests.parsed import statement

POINT = "SELECT * FROM t WHERE id = ?"


@pytest.fixture
def disk() -> HeldDisk:
    return HeldDisk()


@pytest.fixture
def conn(tmp_path, disk: HeldDisk) -> Iterator[Connection]:
    yield from connected(
        tmp_path,
        disk,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)",
        "INSERT INTO t VALUES (1, 10), (2, 20)",
    )


def test_a_point_read_does_not_queue_behind_a_commit_waiting_for_readers(conn):
    # A reader inside the lock, a commit waiting for it: the lock lets no new reader in
    # until the commit is done, but a point read needs no lock and answers at once.
    state = conn.instance.database("demo").state_lock
    inside, leave = threading.Event(), threading.Event()

    def long_reader() -> None:
        with state:
            inside.set()
            leave.wait(4 * SOON)

    reader = threading.Thread(target=long_reader, daemon=True)
    reader.start()
    assert inside.wait(SOON)
    committing, _ = in_thread(lambda: conn.execute("INSERT INTO t VALUES (3, 30)"))
    while not state._writers_waiting:  # the commit now keeps new readers of the lock out
        committing.join(0.001)
    try:
        reading, read = in_thread(lambda: conn.execute(POINT, (2,)).rows)
        reading.join(SOON)
        assert not reading.is_alive(), "the point read waited for the lock"
        assert read == [[(2, 20)]]
    finally:
        leave.set()
    committing.join(SOON)
    assert conn.execute(POINT, (3,)).rows == [(3, 30)]


def test_a_point_read_during_an_install_waits_for_it_and_sees_it(conn):
    state = conn.instance.database("demo").state_lock
    with state.exclusive():
        assert state.installs & 1
        reading, read = in_thread(lambda: conn.execute(POINT, (1,)).rows)
        reading.join(WHILE)
        assert reading.is_alive(), "the point read did not wait for the install"
    reading.join(SOON)
    assert read == [[(1, 10)]]
    assert not state.installs & 1


def test_a_read_an_install_overlapped_is_not_kept(conn):
    database = conn.instance.database("demo")
    select = statement(POINT, ast.Select)

    def plans_while_a_commit_installs(select, schema, plans):
        with database.state_lock.exclusive():  # a whole commit between the two looks
            pass
        return point_plan(select, schema, plans)

    assert read_without_lock(database, select, "t", plans_while_a_commit_installs, (1,)) is None
    read = read_without_lock(database, select, "t", point_plan, (1,))
    assert read is not None
    columns, rows = read
    assert [c.name for c in columns] == ["id", "v"] and rows == [(1, 10)]


def test_a_point_read_shows_no_commit_before_it_is_durable(conn, disk):
    disk.hold()
    writer, _ = in_thread(lambda: conn.execute("INSERT INTO t VALUES (5, 50)"))
    database = conn.instance.database("demo")
    while database.applied_lsn == database.log.durable_lsn:
        writer.join(0.001)  # until the commit is installed, its flush held
    reading, read = in_thread(lambda: conn.execute(POINT, (5,)).rows)
    reading.join(WHILE)
    assert reading.is_alive(), "the row was shown before its commit was durable"
    disk.release()
    reading.join(SOON)
    assert read == [[(5, 50)]]
    writer.join(SOON)


@pytest.fixture
def fast_switches() -> Iterator[None]:
    """Threads switch within installs and reads, not only between them (as it was after)."""
    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(switching)


def test_point_reads_beside_commits_find_every_committed_row(conn, fast_switches):
    """Commits that split, copy and grow the table's blocks (rows in random order) run
    beside point reads of rows committed before: every read finds its row, whole."""
    held = 3000
    rng = random.Random(7)
    keys = list(range(100, 100 + 3 * held))
    rng.shuffle(keys)
    conn.instance.session("demo").insert_rows("t", ["id", "v"], [(k, -k) for k in keys[:held]])
    stop = threading.Event()

    def write() -> None:
        for at in range(held, len(keys), 50):
            conn.session().insert_rows("t", ["id", "v"], [(k, -k) for k in keys[at : at + 50]])
            conn.execute("UPDATE t SET v = v WHERE id = ?", (keys[at],))
        stop.set()

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    reads = 0
    session = conn.session()
    while not stop.is_set() or reads < 1000:
        key = keys[rng.randrange(held)]
        assert session.execute(POINT, (key,)).rows == [(key, -key)]
        reads += 1
    writer.join(SOON)
    assert conn.execute("SELECT count(*) FROM t").rows == [(2 + len(keys),)]

"""`WriteAheadLog.when_durable`: a call made once a record is durable, by the thread whose
flush made it so, never before; at once (by its caller) when it is durable already; and
once the log failed, so that no one waits for a flush that will never come."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.errors import WritesStopped
from tests.engine.features.held_disk import SOON, WHILE, HeldDisk, in_thread


@pytest.fixture
def disk() -> HeldDisk:
    return HeldDisk()


@pytest.fixture
def log(tmp_path: Path, disk: HeldDisk):
    opened = WriteAheadLog(tmp_path / "wal", files=disk)
    yield opened
    disk.release()
    opened.close()


def test_a_call_is_made_once_the_record_is_durable_by_the_flushing_thread(log, disk):
    log.wait_durable(log.append(b"first"))
    lsn = log.append(b"second")
    called: list[str] = []
    done = threading.Event()

    def call() -> None:
        called.append(threading.current_thread().name)
        done.set()

    assert log.when_durable(lsn, call)
    disk.hold()
    flushing, _ = in_thread(lambda: log.wait_durable(lsn))
    assert not done.wait(WHILE), "called before the record was durable"
    disk.release()
    assert done.wait(SOON)
    flushing.join(SOON)
    assert called == [flushing.name]
    assert log.durable_lsn >= lsn


def test_a_later_record_waits_for_its_own_flush(log, disk):
    first = log.append(b"first")
    second = log.append(b"second")
    called: list[int] = []
    assert log.when_durable(second, lambda: called.append(second))
    log.wait_durable(first)  # its flush takes every record appended so far
    assert called == [second]
    third = log.append(b"third")
    assert log.when_durable(third, lambda: called.append(third))
    assert called == [second]
    log.wait_durable(third)
    assert called == [second, third]


def test_a_durable_record_is_the_callers_to_call(log):
    lsn = log.append(b"one")
    log.wait_durable(lsn)
    assert not log.when_durable(lsn, lambda: pytest.fail("kept, though durable"))


def test_a_failed_flush_makes_every_call(log, disk):
    lsn = log.append(b"one")
    called: list[int] = []
    assert log.when_durable(lsn, lambda: called.append(lsn))
    disk.hold()
    flushing, raised = in_thread(lambda: log.wait_durable(lsn))
    disk.release(fail=True)
    flushing.join(SOON)
    assert isinstance(raised[0], WritesStopped)
    assert called == [lsn]
    assert not log.when_durable(lsn + 1, lambda: pytest.fail("kept after the failure"))

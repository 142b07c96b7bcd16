"""The group commit's gather: a leader's flush waits for its batch to fill, no longer."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import cast

import pytest

from refimpl.engine.storage import wal
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_gather import Gather


class _Racing:
    """The log's lock, with an append that takes it first when the waiter takes it back
    (`racing`: the gather opened after its wait's time ran out, before the waiter goes on)."""

    def __init__(self, gather: Gather) -> None:
        self._lock = threading.Lock()
        self._gather = gather
        self.racing = False

    def acquire(self) -> None:
        if self.racing:
            self.racing = False
            _append(self._lock, self._gather, 7)
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()


def _append(lock: threading.Lock, gather: Gather, lsn: int) -> None:
    """What the log's append does for the gather, under the log's lock."""
    with lock:
        if gather.lsn and lsn >= gather.lsn:
            gather.open()


@pytest.mark.parametrize("opened", ["while waiting", "after the time, before the lock", "never"])
def test_a_wait_lasts_until_opened_or_its_time_and_leaves_the_next_one_waiting(
    opened: str,
) -> None:
    """However a wait ended, it ends with no one gathering, and the next wait is a wait
    again: an open never releases an unheld gate, nor leaves it open for the next wait."""
    gather = Gather()
    racing = _Racing(gather)
    lock = cast(threading.Lock, racing)
    lock.acquire()
    if opened == "while waiting":
        opener = threading.Timer(0.01, _append, (racing._lock, gather, 7))
        opener.start()
        gather.wait(lock, 7, 60.0)
        opener.join()
    else:
        racing.racing = opened != "never"
        gather.wait(lock, 7, 0.01)
    assert gather.lsn == 0
    started = time.monotonic()
    gather.wait(lock, 9, 0.05)
    assert time.monotonic() - started >= 0.05
    lock.release()


def _leader(log: WriteAheadLog, lsn: int) -> threading.Thread:
    thread = threading.Thread(target=log.wait_durable, args=(lsn,))
    thread.start()
    return thread


def _after_a_slow_flush_of_two(log: WriteAheadLog) -> None:
    """Leave `log` after a flush of two records (LSN 2 durable) that took two minutes, as
    far as its gather knows: the next leader gathers a batch of two, bounded by `slow_gathers`
    at 60 s."""
    log.append(b"a")
    log.wait_durable(log.append(b"b"))
    log._last_flush_seconds = 120.0


@pytest.fixture
def slow_gathers(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gather bounded at a minute: a flush that waits out its bound fails the test."""
    monkeypatch.setattr(wal, "MAX_SECONDS", 60.0)


def test_a_batch_as_large_as_the_last_is_flushed_without_waiting(
    tmp_path: Path, slow_gathers: None
) -> None:
    with WriteAheadLog(tmp_path) as log:
        _after_a_slow_flush_of_two(log)
        log.append(b"c")
        leader = _leader(log, log.append(b"d"))
        leader.join(timeout=10)
        assert not leader.is_alive()
        assert log.durable_lsn == 4


def test_the_append_that_fills_the_batch_starts_the_flush(
    tmp_path: Path, slow_gathers: None
) -> None:
    with WriteAheadLog(tmp_path) as log:
        _after_a_slow_flush_of_two(log)
        fsyncs = log.fsync_count
        leader = _leader(log, log.append(b"c"))
        leader.join(timeout=0.2)
        assert leader.is_alive() and log.durable_lsn == 2  # gathering: one of two
        log.append(b"d")
        leader.join(timeout=10)
        assert not leader.is_alive()
        assert log.durable_lsn == 4 and log.fsync_count == fsyncs + 1  # both, one flush

"""The workers both servers run on: the woken worker answers itself, one event a connection
until it is re-armed, at most `places` answering at once, each event with its mask, and a
stop ends every wait."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from refimpl.engine import admission
from refimpl.netpool.polling import ARMED, PollingWorkers

WAIT = 10.0  # generous: only a hang fails


class Recorder:
    """An `on_event` that notes which thread answered which descriptor, and when."""

    def __init__(self, hold: float = 0.0) -> None:
        self.hold = hold
        self.lock = threading.Lock()
        self.events: list[tuple[int, str]] = []
        self.masks: list[int] = []
        self.running = 0
        self.most_running = 0
        self.seen = threading.Condition(self.lock)

    def __call__(self, fd: int, mask: int) -> None:
        with self.lock:
            self.masks.append(mask)
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        time.sleep(self.hold)
        with self.lock:
            self.running -= 1
            self.events.append((fd, threading.current_thread().name))
            self.seen.notify_all()

    def wait_for(self, count: int) -> None:
        with self.seen:
            assert self.seen.wait_for(lambda: len(self.events) >= count, WAIT)


@pytest.fixture
def pairs() -> Iterator[list[tuple[socket.socket, socket.socket]]]:
    made = [socket.socketpair() for _ in range(6)]
    yield made
    for a, b in made:
        a.close()
        b.close()


def _workers(recorder: Recorder, places: int = 2, threads: int = 4) -> PollingWorkers:
    workers = PollingWorkers("test-pool", threads, recorder, lambda: None, 0.05, places)
    workers.start()
    return workers


def test_a_readable_connection_is_answered_once_until_re_armed(pairs):
    recorder = Recorder()
    workers = _workers(recorder)
    ours, theirs = pairs[0]
    try:
        workers.epoll.register(ours.fileno(), ARMED)
        theirs.send(b"x")
        recorder.wait_for(1)
        time.sleep(0.2)  # still readable, but one-shot: nobody is woken again
        assert len(recorder.events) == 1
        assert recorder.events[0][0] == ours.fileno()
        assert recorder.events[0][1].startswith("test-pool-")
        workers.epoll.modify(ours.fileno(), ARMED)
        recorder.wait_for(2)
    finally:
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_each_event_comes_with_its_mask(pairs):
    """The peer's end of the stream that came with its last bytes shows in the one event
    they raise (`EPOLLRDHUP`), so a server that keeps its registration edge-triggered
    knows a short read did not take everything there is to read."""
    recorder = Recorder()
    workers = _workers(recorder)
    ours, theirs = pairs[0]
    try:
        theirs.send(b"last bytes")
        theirs.shutdown(socket.SHUT_WR)
        edge = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLET
        workers.epoll.register(ours.fileno(), edge)
        recorder.wait_for(1)
        assert recorder.events[0][0] == ours.fileno()
        assert recorder.masks[0] & select.EPOLLIN
        assert recorder.masks[0] & select.EPOLLRDHUP
        pairs[1][1].send(b"x")  # bytes alone: no hang-up in their mask
        workers.epoll.register(pairs[1][0].fileno(), edge)
        recorder.wait_for(2)
        assert recorder.masks[1] & select.EPOLLIN
        assert not recorder.masks[1] & select.EPOLLRDHUP
    finally:
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_no_more_than_the_places_answer_at_once(pairs):
    recorder = Recorder(hold=0.05)
    workers = _workers(recorder, places=2, threads=6)
    try:
        for ours, theirs in pairs:
            workers.epoll.register(ours.fileno(), ARMED)
            theirs.send(b"x")
        recorder.wait_for(len(pairs))
        assert recorder.most_running <= 2
    finally:
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_an_answer_that_waits_hands_its_place_on(pairs):
    # One place: a waiting answer gives it on, so the other connection is answered meanwhile.
    release = threading.Event()
    answered: list[int] = []
    slow = pairs[0][0].fileno()

    def on_event(fd: int, mask: int) -> None:
        if fd == slow:
            admission.waiting()
            assert release.wait(WAIT)
        answered.append(fd)

    workers = PollingWorkers("test-pool", 2, on_event, lambda: None, 0.05, places=1)
    workers.start()
    try:
        for ours, _theirs in pairs[:2]:
            workers.epoll.register(ours.fileno(), ARMED)
        pairs[0][1].send(b"x")
        time.sleep(0.1)
        pairs[1][1].send(b"x")
        deadline = time.monotonic() + WAIT
        while pairs[1][0].fileno() not in answered:
            assert time.monotonic() < deadline, "the waiting answer kept its place"
            time.sleep(0.01)
        release.set()
    finally:
        release.set()
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_a_bug_in_an_answer_leaves_the_worker_serving(pairs, caplog):
    calls: list[int] = []

    def on_event(fd: int, mask: int) -> None:
        calls.append(fd)
        if len(calls) == 1:
            raise RuntimeError("boom")

    workers = PollingWorkers("test-pool", 1, on_event, lambda: None, 0.05, places=1)
    workers.start()
    ours, theirs = pairs[0]
    try:
        workers.epoll.register(ours.fileno(), ARMED)
        theirs.send(b"x")
        deadline = time.monotonic() + WAIT
        while not calls:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        workers.epoll.modify(ours.fileno(), ARMED)
        while len(calls) < 2:
            assert time.monotonic() < deadline, "the worker died with the bug"
            time.sleep(0.01)
        assert "bug: unexpected error" in caplog.text
    finally:
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_stop_ends_every_wait_for_an_event_or_a_place():
    workers = PollingWorkers("test-pool", 5, lambda fd, mask: None, lambda: None, 0.05, places=1)
    workers.start()
    time.sleep(0.1)
    started = time.monotonic()
    workers.stop()
    workers.join()
    workers.epoll.close()
    assert time.monotonic() - started < WAIT


def test_events_taken_together_are_answered_in_turn_or_left_once_the_place_went_on(pairs):
    """A wait takes up to `taken` events: the worker answers them one after the other
    while it holds its place; once its place went on (an answer waited), each event left
    goes to `on_left`, not answered there. None is lost, none answered twice."""
    release = threading.Event()
    answered: list[int] = []
    left: list[int] = []
    first = threading.Event()

    def on_event(fd: int, mask: int) -> None:
        answered.append(fd)
        if len(answered) == 1:
            first.set()
            admission.waiting()  # its place goes on: the events it took are left
            assert release.wait(WAIT)

    def on_left(fd: int, mask: int) -> None:
        left.append(fd)

    # One worker, one place: the one wait takes every ready event at once.
    workers = PollingWorkers("test-pool", 1, on_event, lambda: None, 0.05, 1, 8, on_left)
    try:
        fds = [ours.fileno() for ours, _ in pairs[:4]]
        for ours, theirs in pairs[:4]:
            workers.epoll.register(ours.fileno(), ARMED)
            theirs.send(b"x")
        workers.start()
        assert first.wait(WAIT)
        release.set()
        deadline = time.monotonic() + WAIT
        while len(answered) + len(left) < 4:
            assert time.monotonic() < deadline, "an event was lost"
            time.sleep(0.01)
        time.sleep(0.1)
        assert len(answered) == 1 and sorted(answered + left) == sorted(fds)
    finally:
        release.set()
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_events_taken_together_are_all_answered_by_a_worker_that_keeps_its_place(pairs):
    answered: list[int] = []
    threads: set[str] = set()

    def on_event(fd: int, mask: int) -> None:
        answered.append(fd)
        threads.add(threading.current_thread().name)

    workers = PollingWorkers(
        "test-pool", 1, on_event, lambda: None, 0.05, 1, 8, lambda fd, mask: None
    )
    try:
        fds = [ours.fileno() for ours, _ in pairs]
        for ours, theirs in pairs:
            workers.epoll.register(ours.fileno(), ARMED)
            theirs.send(b"x")
        workers.start()
        deadline = time.monotonic() + WAIT
        while len(answered) < len(pairs):
            assert time.monotonic() < deadline, "an event was lost"
            time.sleep(0.01)
        time.sleep(0.1)
        assert sorted(answered) == sorted(fds) and len(threads) == 1
    finally:
        workers.stop()
        workers.join()
        workers.epoll.close()


def test_several_events_a_wait_need_somewhere_to_leave_them():
    with pytest.raises(ValueError):
        PollingWorkers("test-pool", 1, lambda fd, mask: None, lambda: None, 0.05, 1, 4)

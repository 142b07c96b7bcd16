"""The postbox between the acknowledging thread and the workers: whatever is posted is taken
by a worker its post's ring wakes, each item once, in order; none is left behind."""

from __future__ import annotations

import select
import threading

from refimpl.pgwire import postbox
from refimpl.pgwire.postbox import Postbox

ITEMS = 20_000
TAKERS = 4


def test_every_item_is_taken_once_in_order_by_concurrent_takers():
    box: Postbox[int] = Postbox()
    epoll = select.epoll()
    epoll.register(box.fileno(), postbox.EVENTS)  # as the server's epoll set holds it
    takes: list[list[int]] = []
    done = threading.Event()

    def taker() -> None:
        while not done.is_set():
            if not epoll.poll(0.05, 1):
                continue
            taken = box.take()  # nothing read back, nothing re-armed: as the server
            if taken:
                takes.append(taken)

    threads = [threading.Thread(target=taker) for _ in range(TAKERS)]
    for thread in threads:
        thread.start()
    try:
        for first in range(0, ITEMS, 7):  # rounds of a few items, each posted at once
            box.post(list(range(first, min(first + 7, ITEMS))))
        for _ in range(200):
            if sum(map(len, takes)) >= ITEMS:
                break
            threading.Event().wait(0.05)
    finally:
        done.set()
        for thread in threads:
            thread.join()
        epoll.close()
        box.close()
    every = sorted(item for taken in takes for item in taken)
    assert every == list(range(ITEMS))  # each once, none left behind
    for taken in takes:  # a take's items in the order they were posted
        assert taken == list(range(taken[0], taken[0] + len(taken)))


def test_a_post_after_the_close_rings_nothing_and_is_still_taken():
    box: Postbox[str] = Postbox()
    box.post(["first"])
    box.close()
    box.post(["late"])  # the eventfd is closed: nothing is written to it (nor to a reused fd)
    assert box.take() == ["first", "late"]
    box.close()


def test_each_post_is_an_event_though_nothing_is_read_or_re_armed():
    box: Postbox[int] = Postbox()
    epoll = select.epoll()
    epoll.register(box.fileno(), postbox.EVENTS)
    try:
        assert epoll.poll(0) == []  # nothing posted, nothing rung
        box.post([])
        assert epoll.poll(0) == []  # a post of nothing is no event
        for round_ in range(3):
            box.post([round_, round_ + 10])
            assert [fd for fd, _ in epoll.poll(0)] == [box.fileno()]
            assert epoll.poll(0) == []  # one event a post, not one a poll
            assert box.take() == [round_, round_ + 10]
    finally:
        epoll.close()
        box.close()

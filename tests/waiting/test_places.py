"""The fair share of the wait places (refimpl.waiting.places): a user holding `k` places
takes another only while more than `k` are free, the admin user takes any free place, and
every place given back can be taken again."""

from __future__ import annotations

import threading

from refimpl.waiting.places import ADMIN_OWNER, FairPlaces


def test_a_user_holds_at_most_half_and_the_last_free_place_goes_to_one_holding_none() -> None:
    places = FairPlaces(threading.BoundedSemaphore(4))
    taken = 0
    while places.take("greedy"):
        taken += 1
    assert taken == 2  # 4 free: a 1st (1 needed), a 2nd (more than 1 free), then 2 left
    assert places.held("greedy") == 2
    assert places.take("other")  # 2 free, holding none
    assert not places.take("other")  # 1 free, holding 1
    assert places.take("third")  # the last free place: to a user holding none
    assert not places.take("fourth")  # none free


def test_the_admin_user_takes_any_free_place() -> None:
    places = FairPlaces(threading.BoundedSemaphore(3))
    assert all(places.take(ADMIN_OWNER) for _ in range(3))
    assert not places.take(ADMIN_OWNER)
    assert not places.take("user")


def test_places_given_back_are_taken_again_by_anyone() -> None:
    places = FairPlaces(threading.BoundedSemaphore(2))
    assert places.take("a") and places.take("b")
    assert not places.take("c")
    places.give_back("a")
    assert places.held("a") == 0
    assert places.take("c")
    places.give_back("b")
    places.give_back("c")
    assert all(places.take(ADMIN_OWNER) for _ in range(2))


def test_places_taken_before_it_was_made_are_not_its_to_give() -> None:
    semaphore = threading.BoundedSemaphore(3)
    assert semaphore.acquire(blocking=False)
    places = FairPlaces(semaphore)
    assert places.take(ADMIN_OWNER) and places.take(ADMIN_OWNER)
    assert not places.take(ADMIN_OWNER)


def test_takes_from_many_threads_never_hand_out_more_places_than_there_are() -> None:
    places = FairPlaces(threading.BoundedSemaphore(8))
    held: list[int] = []
    most = [0]
    lock = threading.Lock()

    def work(owner: str) -> None:
        for _ in range(2000):
            if places.take(owner):
                with lock:
                    held.append(1)
                    most[0] = max(most[0], len(held))
                    held.pop()
                places.give_back(owner)

    threads = [threading.Thread(target=work, args=(f"u{i}",)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most[0] <= 8
    assert all(places.take(ADMIN_OWNER) for _ in range(8))  # every place came back

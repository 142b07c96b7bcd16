"""The state a live query's answer is read at (live_answers.StateReads): the pair of
revision counter and applied LSN is read under the state lock, and a pair kept from such a
read is taken without the lock only while neither has moved since."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from refimpl.engine.features.live_answers import StateReads, Subscription


class _CountedLock:
    """A state lock that counts its holds."""

    def __init__(self) -> None:
        self.holds = 0

    def __enter__(self) -> None:
        self.holds += 1

    def __exit__(self, *exc: object) -> None:
        pass


class _Database:
    """What StateReads reads of a database (hashed by identity, as a Database is)."""

    def __init__(self, applied_lsn: int) -> None:
        self.state_lock = _CountedLock()
        self.applied_lsn = applied_lsn


def _subscription(database: Any, symbol: object = "A") -> Subscription:
    return cast(Subscription, SimpleNamespace(database=database, table="t", symbol=symbol))


def test_a_kept_pair_is_taken_without_the_lock_while_neither_has_moved() -> None:
    database = _Database(10)
    counters = {"A": 3, "B": 4}

    def counter(subscription: Subscription) -> int:
        return counters[subscription.symbol]

    states = StateReads()
    subscription = _subscription(database)
    assert states.read(subscription, counter) == (3, 10)
    assert database.state_lock.holds == 1
    assert states.read(subscription, counter) == (3, 10)
    assert states.read(_subscription(database), counter) == (3, 10)  # another subscriber
    assert database.state_lock.holds == 1
    assert states.read(_subscription(database, "B"), counter) == (4, 10)  # another value
    assert database.state_lock.holds == 2


def test_a_moved_counter_or_applied_lsn_is_read_again_under_the_lock() -> None:
    database = _Database(10)
    counters = {"A": 3}

    def counter(subscription: Subscription) -> int:
        return counters[subscription.symbol]

    states = StateReads()
    subscription = _subscription(database)
    states.read(subscription, counter)
    counters["A"] = 4  # a commit under way moved the counter: its end is waited for
    assert states.read(subscription, counter) == (4, 10)
    assert database.state_lock.holds == 2
    database.applied_lsn = 11  # a commit of another value ended
    assert states.read(subscription, counter) == (4, 11)
    assert database.state_lock.holds == 3
    assert states.read(subscription, counter) == (4, 11)
    assert database.state_lock.holds == 3


def test_at_most_size_pairs_are_kept() -> None:
    database = _Database(10)
    states = StateReads(size=2)
    for symbol in ("A", "B", "C"):
        states.read(_subscription(database, symbol), lambda _: 1)
    assert database.state_lock.holds == 3
    states.read(_subscription(database, "C"), lambda _: 1)  # kept
    assert database.state_lock.holds == 3
    states.read(_subscription(database, "A"), lambda _: 1)  # the oldest went
    assert database.state_lock.holds == 4


def test_a_counter_read_by_the_caller_is_not_read_again() -> None:
    """A re-run passes the counter it read to see that its query moved: the lock-free look
    compares that read (made before the applied LSN's) with the kept pair."""
    database = _Database(10)
    reads: list[str] = []
    counters = {"A": 3}

    def counter(subscription: Subscription) -> int:
        reads.append(subscription.symbol)
        return counters[subscription.symbol]

    states = StateReads()
    subscription = _subscription(database)
    assert states.read(subscription, counter) == (3, 10)
    reads.clear()
    assert states.read(subscription, counter, 3) == (3, 10)
    assert reads == [] and database.state_lock.holds == 1
    # A commit under way moved the counter after the caller's read: the kept pair is as
    # new as that read (the commit wakes the caller again), and a read of the new counter
    # is not kept, so the pair is read again under the lock.
    counters["A"] = 4
    assert states.read(subscription, counter, 3) == (3, 10)
    assert states.read(subscription, counter, 4) == (4, 10)
    assert reads == ["A"] and database.state_lock.holds == 2

"""The waiting room: parked answers decided at commits, deadlines and the stop, once each."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import pytest

from refimpl.engine.tracking.signals import CommitSignal
from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.netpool.places import FifoSlots
from refimpl.waiting.fanout import (
    FANOUT_SPACING,
    IDLE_BELOW,
    MAX_FANOUT_WAIT,
    MIN_SHARE,
    TURN_PAUSE_SECONDS,
    TURN_SECONDS,
    FanoutPace,
    taking_turns,
)
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import (
    MAX_ROUND_WAIT,
    ROUND_SPACING,
    Pace,
    WaitingRoom,
)


def park(
    room: WaitingRoom,
    signal: CommitSignal,
    wanted: int,
    wait: float,
    paced: bool = False,
    seen: int | None = None,
) -> tuple[Parked, list[Answer], threading.Event]:
    got: list[Answer] = []
    released = threading.Event()

    def attempt(_: int) -> Answer | None:
        return Answer(b"news") if signal.lsn >= wanted else None

    deferred = Parked(
        signal,
        signal.lsn if seen is None else seen,
        attempt,
        lambda: Answer(b"nothing"),
        time.monotonic() + wait,
        released.set,
        kind=Kind.READER if paced else Kind.ACKNOWLEDGEMENT,
    )
    room.park(deferred)
    deferred.on_ready(got.append)
    return deferred, got, released


def eventually(condition, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_a_commit_decides_a_parked_answer_once():
    room, signal = WaitingRoom(to_response), CommitSignal()
    _, got, released = park(room, signal, wanted=2, wait=30)
    signal.publish(1)  # not yet what the reader waits for
    time.sleep(0.05)
    assert got == []
    signal.publish(2)
    assert eventually(lambda: got)
    signal.publish(3)
    time.sleep(0.05)
    assert [a.body for a in got] == [b"news"] and released.is_set()
    room.close()


def test_the_deadline_and_the_stop_answer_with_nothing():
    room, signal = WaitingRoom(to_response), CommitSignal()
    _, early, _ = park(room, signal, wanted=9, wait=0.05)
    _, late, _ = park(room, signal, wanted=9, wait=60)
    assert eventually(lambda: early)
    assert early[0].body == b"nothing" and late == []
    room.close()
    assert late[0].body == b"nothing"
    _, after, _ = park(room, signal, wanted=9, wait=60)
    assert after[0].body == b"nothing"  # a closed room answers at once


def test_iterating_a_deferred_waits_for_its_answer():
    room, signal = WaitingRoom(to_response), CommitSignal()
    deferred, _, _ = park(room, signal, wanted=1, wait=30)
    statuses: list[str] = []

    def start(
        status: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        statuses.append(status)
        return lambda _data: None

    body = deferred({}, start)
    threading.Timer(0.05, signal.publish, (1,)).start()
    assert b"".join(body) == b"news" and statuses == ["200 OK"]
    room.close()


def test_paced_readers_wait_for_the_next_round():
    pace = Pace()
    pace.round(10.0, 0.002)  # a round that took 2 ms to send
    assert pace.next_round == pytest.approx(10.0 + ROUND_SPACING * 0.002)
    pace.round(20.0, 1.0)  # a round held up for a second waits no longer than the bound
    assert pace.next_round == pytest.approx(20.0 + MAX_ROUND_WAIT)
    room, signal = WaitingRoom(to_response), CommitSignal()
    _, first, _ = park(room, signal, wanted=1, wait=30, paced=True)
    signal.publish(1)
    assert eventually(lambda: first)
    # News already there (seen -1): the next round answers it without another commit.
    _, second, _ = park(room, signal, wanted=1, wait=30, paced=True, seen=-1)
    assert eventually(lambda: second)
    assert second[0].body == b"news"
    room.close()


def test_acknowledgements_are_answered_by_the_publishing_thread(monkeypatch):
    room, signal = WaitingRoom(to_response), CommitSignal()
    passes: list[int] = []
    original = room._decide_due

    def counted() -> None:
        passes.append(1)
        original()

    monkeypatch.setattr(room, "_decide_due", counted)
    threads: list[str] = []
    acks = [park(room, signal, wanted=1, wait=30)[0] for _ in range(5)]  # unpaced: writes
    for deferred in acks:
        deferred.on_ready(lambda answer: threads.append(threading.current_thread().name))
    time.sleep(0.05)
    passes.clear()
    signal.publish(1)  # in this thread, as the flusher publishes its flush
    assert threads == [threading.current_thread().name] * 5
    time.sleep(0.05)
    assert passes == []  # no reader parked: the room's thread was not even woken
    room.close()


def test_fifo_slots_serve_waiters_in_order():
    slots = FifoSlots(1)
    slots.acquire()
    order: list[int] = []
    threads = []

    def in_turn(n: int) -> None:
        slots.acquire()
        order.append(n)
        slots.release()

    for n in range(5):
        thread = threading.Thread(target=in_turn, args=(n,))
        thread.start()
        threads.append(thread)
        time.sleep(0.02)  # each waiter queued before the next
    slots.release()
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]


def test_after_round_actions_wait_for_the_whole_round():
    room, signal = WaitingRoom(to_response), CommitSignal()
    events: list[str] = []
    for n in range(3):
        deferred, _, _ = park(room, signal, wanted=1, wait=30, paced=True)  # readers

        def on_answer(answer: object, n: int = n) -> None:
            events.append(f"answer {n}")
            room.after_round(lambda: events.append(f"after {n}"))

        deferred.on_ready(on_answer)
    signal.publish(1)
    assert eventually(lambda: len(events) == 6)
    assert events[:3] == ["answer 0", "answer 1", "answer 2"]
    assert sorted(events[3:]) == ["after 0", "after 1", "after 2"]
    outside: list[int] = []
    room.after_round(lambda: outside.append(1))  # not in a round: at once
    assert outside == [1]
    room.close()


def test_parking_without_news_makes_no_pass(monkeypatch):
    room, signal = WaitingRoom(to_response), CommitSignal()
    park(room, signal, wanted=1, wait=30, paced=True)  # the first starts the room, listens
    passes: list[float] = []
    original = room._decide_due

    def counted() -> None:
        passes.append(1)
        original()

    monkeypatch.setattr(room, "_decide_due", counted)
    time.sleep(0.05)
    passes.clear()
    waiting = [park(room, signal, wanted=1, wait=30, paced=True)[1] for _ in range(20)]
    time.sleep(0.1)
    assert passes == []  # twenty readers that wait cost the room nothing
    signal.publish(1)
    assert eventually(lambda: all(waiting))
    assert 1 <= len(passes) <= 3
    room.close()


def test_a_fan_out_round_attempts_each_paced_stream_once_and_spaces_the_next():
    # The rest of the process as busy as can be: the whole spacing applies.
    room = WaitingRoom(to_response, FanoutPace(lambda: 2 * time.monotonic()))
    rounds: list[float] = []  # when each stream's attempts came
    attempts: dict[int, int] = {}
    order: list[int] = []  # which stream each attempt was for
    streams: list[Parked] = []

    def attempt_of(n: int):
        def attempt(_: int) -> Part[Answer] | None:
            order.append(n)
            if n == 0:
                rounds.append(time.monotonic())
                if len(rounds) == 1:  # pokes while the first round goes on: three each
                    for _ in range(3):
                        room.poke_all(streams)
            attempts[n] = attempts.get(n, 0) + 1
            busy = time.thread_time() + 0.002  # what sending costs: CPU time of the round
            while time.thread_time() < busy:
                pass
            return Part(Answer(b"part"))

        return attempt

    for n in range(5):
        stream = Parked(
            None,
            0,
            attempt_of(n),
            lambda: Part(Answer(b"")),
            time.monotonic() + 60,
            lambda: None,
            kind=Kind.STREAM,
        )
        stream.on_ready(lambda _: None, lambda _: None)
        room.park(stream)
        streams.append(stream)
    room.poke_all(streams)
    assert eventually(
        lambda: (
            len(rounds) == 2
            and len(attempts) == 5
            and all(count == 2 for count in attempts.values())
        )
    )
    time.sleep(0.1)
    assert attempts == {n: 2 for n in range(5)}  # three pokes in a round: one attempt
    # The second round waits for the spacing (its first attempt comes a little after the
    # round's start, hence the margin); the round's first stream moves on.
    spacing = min(FANOUT_SPACING * 5 * 0.002, MAX_FANOUT_WAIT)
    assert rounds[1] - rounds[0] >= 0.8 * spacing
    assert sorted(order[5:]) == list(range(5)) and order[5] != order[0]
    room.close()


def test_fan_out_waits_after_a_round_in_proportion_to_how_busy_the_rest_of_the_process_is():
    clock, cpu = [100.0], [0.0]
    pace = FanoutPace(lambda: cpu[0], lambda: clock[0])

    def round_of(cost: float, others: float, gap: float, wall: float | None = None) -> float:
        """A round of CPU time `cost` (wall time `wall`, by default its cost) starting `gap`
        after the last one ended, the rest of the process having used `others` of CPU
        meanwhile: how long after its end the next one waits."""
        clock[0] += gap + (cost if wall is None else wall)
        cpu[0] += cost + others
        pace.round(cost)
        return pace.next_round - clock[0]

    assert round_of(0.01, 0.0, 0.0) == pytest.approx(FANOUT_SPACING * 0.01)  # nothing known
    assert round_of(0.01, 0.0, 0.05) == 0.0  # an idle server: the next commit goes out at once
    # The rest busy 55% of the 60 ms since the last round's end: half the spacing (up to
    # IDLE_BELOW of the time counts as idle; 5% alone is idle, and the next goes at once).
    assert round_of(0.01, 0.033, 0.05) == pytest.approx(FANOUT_SPACING * 0.01 * 0.5)
    assert IDLE_BELOW == 0.1 and round_of(0.01, 0.003, 0.05) == 0.0
    assert round_of(0.01, 0.2, 0.05) == pytest.approx(FANOUT_SPACING * 0.01)  # busy: all of it
    # A round that took long in wall time (its sends waited for the interpreter lock while
    # the writers ran) is followed by the whole wait, counted from its end: rounds never
    # follow each other at once while the rest is busy.
    assert round_of(0.01, 0.3, 0.0, wall=0.3) == pytest.approx(FANOUT_SPACING * 0.01)
    assert round_of(1.0, 1.0, 0.0) == MAX_FANOUT_WAIT  # however long a round took


def test_on_a_machine_whose_cores_others_want_the_fan_out_waits_for_the_cpu_not_the_clock():
    """A round's thread that got a quarter of a core while runnable: the rest of the process
    gets a quarter core too, so twenty times the round's cost of CPU takes four times as
    long; its CPU rate of a quarter core is as busy as it can be."""
    clock, cpu = [100.0], [0.0]
    pace = FanoutPace(lambda: cpu[0], lambda: clock[0])
    for _ in range(5):
        clock[0] += 0.1
        cpu[0] += 0.004 + 0.025  # the round's 4 ms, the rest's quarter of the 100 ms
        pace.round(0.004, waited=0.012)
    assert pace.next_round - clock[0] == pytest.approx(FANOUT_SPACING * 0.004 * 4)
    # A tenth of a core: the wait is stretched no more than 1 / MIN_SHARE times.
    starved = FanoutPace(lambda: cpu[0], lambda: clock[0])
    for _ in range(5):
        clock[0] += 0.1
        cpu[0] += 0.004 + 0.03
        starved.round(0.004, waited=0.036)
    assert starved.next_round - clock[0] == pytest.approx(FANOUT_SPACING * 0.004 / MIN_SHARE)
    # One round delayed once by the scheduler does not stretch the wait by itself.
    quiet = FanoutPace(lambda: cpu[0], lambda: clock[0])
    for waited in [0.0, 0.0, 0.0, 0.0, 0.005]:
        clock[0] += 0.1
        cpu[0] += 0.004 + 0.1
        quiet.round(0.004, waited)
    assert FANOUT_SPACING * 0.004 < quiet.next_round - clock[0] < 2 * FANOUT_SPACING * 0.004


def test_a_keyed_request_without_a_deadline_waits_for_its_poke():
    # Regression: an infinite deadline among the keyed ones stopped the room's thread
    # (waiting `inf` seconds is an OverflowError).
    room, signal = WaitingRoom(to_response), CommitSignal()
    got: list[Answer] = []
    poked = threading.Event()
    keyed = Parked(
        None,
        0,
        lambda _: Answer(b"poked") if poked.is_set() else None,
        lambda: Answer(b"nothing"),
        math.inf,
        lambda: None,
        kind=Kind.LIVE,
    )
    room.park(keyed)
    keyed.on_ready(got.append)
    _, timed, _ = park(room, signal, wanted=9, wait=0.05)
    assert eventually(lambda: timed)  # the room's thread still decides deadlines
    poked.set()
    room.poke(keyed)
    assert eventually(lambda: got) and got[0].body == b"poked"
    room.close()


def test_a_round_takes_turns_at_the_interpreter_lock_and_keeps_every_item_in_order():
    clock = [0.0]
    pauses: list[float] = []

    def spend(items, cost):  # each item costs the round `cost` seconds
        for item in items:
            clock[0] += cost
            yield item

    quick = taking_turns(range(10), pauses.append, lambda: clock[0])
    assert list(spend(quick, 0.0)) == list(range(10)) and pauses == []
    slow = taking_turns(range(10), pauses.append, lambda: clock[0])
    assert list(spend(slow, TURN_SECONDS)) == list(range(10))
    assert pauses == [TURN_PAUSE_SECONDS] * 10  # one after each turn's worth

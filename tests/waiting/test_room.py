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
from refimpl.waiting import fanout
from refimpl.waiting.fanout import (
    BUSY_SHARE,
    FANOUT_SPACING,
    MAX_FANOUT_WAIT,
    SHARED_TURN_SECONDS,
    TURN_PAUSE_SECONDS,
    TURN_SECONDS,
    FanoutPace,
    taking_turns,
)
from refimpl.waiting.pace import MAX_ROUND_WAIT, ROUND_SPACING, Pace
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import WaitingRoom
from tests.waiting.parking import park
from tests.waiting.queued_writers import Writers
from tests.waits import eventually


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
    # Writers queue all the while, and the rest of the process is as busy as can be: the
    # whole spacing applies.
    room = WaitingRoom(to_response, FanoutPace(lambda: 2 * time.monotonic()))
    writers = Writers(storm=True)
    room.watch_writers(writers)
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


def test_close_gives_streams_their_last_part_after_the_round_under_way():
    # A fan-out round still sending when the server stops: every stream's last part goes out
    # after the round's (a compressed stream's end carries the checksum of all before it,
    # and nothing may follow a stream's end).
    room = WaitingRoom(to_response)
    order: list[str] = []
    in_round, closing = threading.Event(), threading.Event()

    class Round:
        def fan_out(self) -> bool:
            in_round.set()
            closing.wait(5)
            time.sleep(0.2)  # the stop is under way meanwhile, on another thread
            order.append("round")
            return False

    def last() -> Answer:
        order.append("last")
        return Answer(b"the end")

    stream = Parked(
        None,
        0,
        lambda _: None,
        lambda: Part(Answer(b"")),
        time.monotonic() + 60,
        lambda: None,
        kind=Kind.STREAM,
        at_close=last,
    )
    stream.on_ready(lambda _: None, lambda _: None)
    room.park(stream)
    stream.batch = Round()
    room.poke_all([stream])
    assert in_round.wait(5)
    closer = threading.Thread(target=room.close)
    closer.start()
    closing.set()
    closer.join(10)
    assert order == ["round", "last"]


def test_fan_out_goes_at_once_while_no_writer_queues_however_busy_the_process_is():
    clock, cpu = [100.0], [0.0]
    pace = FanoutPace(lambda: cpu[0], lambda: clock[0])
    writers = Writers(storm=False)
    pace.watch(writers)
    for gap in (0.0, 0.05, 0.0):
        clock[0] += gap + 0.01
        cpu[0] += 0.5  # the rest of the process busy, other programs' load: no matter
        pace.round(0.01)
        assert pace.next_round == clock[0] and pace.due(clock[0])
    # A commit that queued behind another's flush since the last round's end: the next waits.
    writers.count += 1
    clock[0] += 0.01
    pace.round(0.01)
    assert pace.next_round - clock[0] == pytest.approx(FANOUT_SPACING * 0.01)
    assert not pace.due(clock[0] + 0.1)


def test_while_writers_queue_the_next_round_waits_for_twenty_times_its_cpu_used_by_the_rest():
    clock, cpu = [100.0], [0.0]
    pace = FanoutPace(lambda: cpu[0], lambda: clock[0])
    writers = Writers(storm=True)  # held: the pace watches a log only while it is alive
    pace.watch(writers)
    clock[0] += 0.004
    pace.round(0.004)
    end, wanted = clock[0], FANOUT_SPACING * 0.004
    assert pace.next_round == pytest.approx(end + wanted)
    assert not pace.due(end + wanted / 2)
    # The spacing passed by the clock, but the rest of the process got a quarter of a core
    # meanwhile (other programs want the cores): it waits on for the CPU time still owed.
    cpu[0] += wanted / 4
    assert not pace.due(end + wanted)
    assert pace.next_round == pytest.approx(end + wanted + wanted * 3 / 4)
    cpu[0] += wanted * 3 / 4
    assert pace.due(pace.next_round)
    # Writers that queue for the disk leave the process idle: the spacing by the clock only.
    clock[0] += 0.004
    pace.round(0.004)
    cpu[0] += BUSY_SHARE * wanted / 2
    assert pace.due(clock[0] + wanted)
    # However little CPU the rest gets, and however long a round took: MAX_FANOUT_WAIT at most.
    clock[0] += 1.0
    pace.round(1.0)
    assert pace.next_round - clock[0] == MAX_FANOUT_WAIT
    assert pace.due(clock[0] + MAX_FANOUT_WAIT)


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


def test_a_keyed_request_answered_elsewhere_leaves_the_room_at_its_next_look():
    # A long poll is answered by its owner's pool, not the room: its deadline's entry must
    # not keep it among the parked (nor wake the room's thread for nothing at that time).
    room = WaitingRoom(to_response)
    keyed = Parked(
        None,
        0,
        lambda _: None,
        lambda: Answer(b"nothing"),
        time.monotonic() + 30,
        lambda: None,
        kind=Kind.LIVE,
    )
    room.park(keyed)
    assert room.parked_count() == 1
    keyed.decide(Answer(b"rows"))  # by another thread than the room's
    room.wake()  # the room's next look
    assert eventually(lambda: room.parked_count() == 0, seconds=2.0)
    room.close()


def _keyed(on_timeout: Callable[[], Answer | None], deadline: float) -> Parked[Answer]:
    return Parked(None, 0, lambda _: None, on_timeout, deadline, lambda: None, kind=Kind.LIVE)


def test_a_keyed_request_whose_deadline_handed_its_answer_elsewhere_leaves_when_answered():
    # A long poll whose deadline comes while its re-run runs: `on_timeout` gives nothing and
    # takes the deadline off, the re-run answers. No deadline brings it back to the room.
    room = WaitingRoom(to_response)

    def hand_off() -> None:
        keyed.deadline = math.inf
        return None

    keyed = _keyed(hand_off, time.monotonic())
    room.park(keyed)
    assert eventually(lambda: keyed.deadline == math.inf)
    keyed.decide(Answer(b"rows"))  # by the re-run's thread
    assert eventually(lambda: room.parked_count() == 0, seconds=2.0)
    room.close()


def test_a_keyed_request_whose_deadline_was_taken_off_leaves_when_answered():
    # A deadline taken off after `park` (a long poll's `attach` that found it came before):
    # its heap entry, when due, finds no deadline, and no other brings it back.
    room = WaitingRoom(to_response)
    keyed = _keyed(lambda: None, time.monotonic() - 1)
    room.park(keyed)
    keyed.deadline = math.inf
    # A later deadline's answer: the room's pass has taken the first entry off by then.
    after: list[Answer] = []
    later = _keyed(lambda: Answer(b"nothing"), time.monotonic() - 0.5)
    later.on_ready(after.append)
    room.park(later)
    assert eventually(lambda: after)
    assert room.parked_count() == 1
    keyed.decide(Answer(b"rows"))  # by the re-run's thread
    assert eventually(lambda: room.parked_count() == 0, seconds=2.0)
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
    pauses.clear()
    short = taking_turns(range(10), pauses.append, lambda: clock[0], turn=TURN_SECONDS / 4)
    assert list(spend(short, TURN_SECONDS / 4)) == list(range(10))
    assert pauses == [TURN_PAUSE_SECONDS] * 10  # turns of its own length
    pauses.clear()
    assert list(spend(taking_turns(range(8), pauses.append, lambda: clock[0]), TURN_SECONDS / 4))
    assert len(pauses) == 2  # the default's: one each four of those steps


def test_a_shared_part_goes_out_in_shorter_turns_while_writers_queue(monkeypatch):
    turns: list[float] = []

    def recorded(items, pause=time.sleep, clock=time.monotonic, turn=TURN_SECONDS):
        turns.append(turn)
        return taking_turns(items, pause, clock, turn)

    monkeypatch.setattr(fanout, "taking_turns", recorded)
    writers = Writers(storm=False)
    pace = FanoutPace()
    pace.watch(writers)
    room: WaitingRoom[str] = WaitingRoom(str, pace)
    sent: list[object] = []
    room.share_with(lambda outlets, answer, on_backlog: sent.extend(outlets))
    room.send_shared(["a", "b"], "part", lambda outlet: None)
    pace.round(0.01)  # no commit queued meanwhile
    room.send_shared(["c"], "part", lambda outlet: None)
    writers.count += 3
    pace.round(0.01)  # commits queued behind one another meanwhile
    room.send_shared(["d"], "part", lambda outlet: None)
    assert sent == ["a", "b", "c", "d"]
    assert turns == [TURN_SECONDS, TURN_SECONDS, SHARED_TURN_SECONDS]
    assert SHARED_TURN_SECONDS < TURN_SECONDS
    room.close()

"""A pass of woken live queries (woken_batch's `Woken`) makes its answers and parts
while the commits' flush runs, and hands none over before the flush has ended; when the log
fails instead, none of them is: each is made again and answers the failure (the engine's
half, `PassReads` and `LiveWait`, in tests/engine/features/test_live_durable.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from refimpl.errors import WritesStopped
from refimpl.http.endpoints.woken_batch import Headed, Runs, Taken, Woken, woken
from refimpl.waiting.room import WaitingRoom

LSN = 7  # the commit the parts are made from


class _Log:
    """A log whose flush of LSN ends when told: durable, or failed."""

    def __init__(self) -> None:
        self.durable_lsn = LSN - 1
        self.flushed = threading.Event()
        self.failed = False

    def wait_durable(self, lsn: int) -> None:
        assert self.flushed.wait(5)
        if self.failed:
            raise WritesStopped("writes stopped: the disk failed")
        self.durable_lsn = max(self.durable_lsn, lsn)


class _Database:
    def __init__(self) -> None:
        self.log = _Log()


class _Made:
    """A woken live query as the engine makes it in a pass: the commit's need on the pass's
    reads, or with the pass's failure set, that failure (`LiveWait.attempt` raises it)."""

    def __init__(self, batch: Woken, database: _Database, sent: list[tuple[str, int]]) -> None:
        self.batch, self.database, self.sent = batch, database, sent
        self.made = threading.Event()

    def make(self) -> Callable[[], None]:
        reads = self.batch.reads
        if self.database in reads.failures:
            return lambda: self.sent.append(("failure", self.database.log.durable_lsn))
        reads.needs[self.database] = LSN  # type: ignore[index]  # a stand-in database
        reads.shown = self.database  # type: ignore[assignment]
        self.made.set()
        return lambda: self.sent.append(("rows", self.database.log.durable_lsn))


class _HeadedPart(_Made):
    """A stream's part that others end alike, sent by the room (`send_headed`)."""

    def make(self) -> Callable[[], None]:
        hand_over = super().make()
        if self.database in self.batch.reads.failures:
            return hand_over
        return Headed(self, b"id: s.2\n", b"event: rows\n\n")  # type: ignore[return-value]


class _TakingPart(_HeadedPart):
    """A stream's part whose `takes_after` makes the parts of those woken after it in a row
    that show its database's commit, in one call, as `_LiveStream.take_after` makes those
    that take its step."""

    def make(self) -> Callable[[], None]:
        hand_over = super().make()
        if isinstance(hand_over, Headed):
            return hand_over._replace(takes_after=self.take_after)
        return hand_over

    def take_after(self, woken: list[Runs], at: int) -> Taken:
        taken: list[_Made] = []
        for each in woken[at:]:
            if not isinstance(each, _Made) or each.database is not self.database:
                break
            taken.append(each)
        reads = self.batch.reads
        reads.needs[self.database] = LSN  # type: ignore[index]  # a stand-in database
        reads.shown = self.database  # type: ignore[assignment]
        for each in taken:
            each.made.set()
        return Taken(taken, b"event: rows\n\n", [(each, b"id: s.2\n") for each in taken])


def _sends(room: WaitingRoom, sent: list[tuple[str, int]], database: _Database) -> None:
    """The room's headed sends, each recorded as sent with the durable LSN at its send."""

    def headed(parts, body: bytes) -> None:
        for _outlet, _head in parts:
            sent.append(("part", database.log.durable_lsn))

    room.share_with(lambda *args: None, headed)


def _made(batch: Woken, made: list[_Made]) -> None:
    """`made` woken in `batch`, once each has been made (its pass's flush not yet ended)."""
    for each in made:
        batch.add(each)
    assert all(each.made.wait(5) for each in made)


def _after_the_pass(room: WaitingRoom) -> None:
    """Returns once the user's pass has ended: what it hands over is handed over."""
    done = threading.Event()
    room.owner_work.submit("u", done.set)
    assert done.wait(5)


def test_nothing_made_is_handed_over_before_the_flush_ends(room: WaitingRoom) -> None:
    database, sent = _Database(), list[tuple[str, int]]()
    _sends(room, sent, database)
    batch = woken(room, "u")
    polls = [_Made(batch, database, sent) for _ in range(3)]
    _made(batch, [*polls, _HeadedPart(batch, database, sent)])
    assert not threading.Event().wait(0.2) and sent == [], "sent before the flush ended"
    database.log.flushed.set()
    _after_the_pass(room)
    assert sorted(sent) == [("part", LSN), ("rows", LSN), ("rows", LSN), ("rows", LSN)]


def test_a_failed_flush_is_what_every_part_of_the_pass_answers(room: WaitingRoom) -> None:
    database, sent = _Database(), list[tuple[str, int]]()
    _sends(room, sent, database)
    batch = woken(room, "u")
    _made(batch, [_Made(batch, database, sent), _HeadedPart(batch, database, sent)])
    database.log.failed = True
    database.log.flushed.set()
    _after_the_pass(room)
    assert sent == [("failure", LSN - 1), ("failure", LSN - 1)]


def test_a_failed_log_is_the_answer_of_its_own_databases_parts_only(room: WaitingRoom) -> None:
    failing, well, sent = _Database(), _Database(), list[tuple[str, int]]()
    batch = woken(room, "u")
    _made(batch, [_Made(batch, failing, sent), _Made(batch, well, sent)])
    failing.log.failed = True
    failing.log.flushed.set()
    well.log.flushed.set()
    _after_the_pass(room)
    assert sorted(sent) == [("failure", LSN - 1), ("rows", LSN)]


def test_parts_taken_in_one_call_are_made_again_when_their_log_failed(
    room: WaitingRoom,
) -> None:
    failing, well, sent = _Database(), _Database(), list[tuple[str, int]]()
    _sends(room, sent, well)
    batch = woken(room, "u")
    gate = threading.Event()

    def hold() -> None:
        gate.wait(5)

    room.owner_work.submit("u", hold)  # its pass then finds them all woken
    made = [_TakingPart(batch, failing, sent), _Made(batch, failing, sent)]
    made += [_Made(batch, failing, sent), _TakingPart(batch, well, sent), _Made(batch, well, sent)]
    for each in made:
        batch.add(each)
    gate.set()
    assert all(each.made.wait(5) for each in made)
    failing.log.failed = True
    failing.log.flushed.set()
    well.log.flushed.set()
    _after_the_pass(room)
    # The failed log's three (one taking the two after it) each answer its failure; the
    # well one's two parts are sent.
    assert sorted(sent) == [*[("failure", LSN - 1)] * 3, ("part", LSN), ("part", LSN)]

"""A parked request: an answer decided later, by whichever thread learns it first.

Theory of operation
-------------------
A request that cannot be answered now (a reader asking past the last commit, a write that
must be durable before it is acknowledged, a live query waiting for a change, a long-lived
stream) is *parked*: its `Parked` goes to the `WaitingRoom` and the connection goes back to
the server's poll set, so no worker thread waits for it. A parked request waits for one of
three things:

- a **commit**: `signal` is a database's `CommitSignal`; after each advance `attempt(lsn)` is
  asked for the answer (None: not yet);
- a **wake-up of its key**: `signal` is None and something (a live query's wake board) calls
  `WaitingRoom.poke(parked)`; then `attempt` is asked;
- its **deadline**: `on_timeout()` gives the answer (a reader: what it has; a stream: a
  heartbeat, after which `deadline` moves on).

An answer is an opaque object of the protocol layer (an HTTP `Answer`, later a PostgreSQL
message batch): this package never looks inside. A `Part` wraps one part of a long-lived
answer that sends many times; the request then stays parked for more.

A parked request is a handle: the room keeps it in its sets and maps by itself (hashed by
identity, on purpose: two requests are never the same one, whatever they hold), and it
carries its own kind and state. Its `Kind` says what it waits for and how it is answered
(`TRAITS`): a write's acknowledgement (a commit, answered by the thread that publishes the
flush), a change-stream reader (a commit, answered in paced rounds), a live query's long
poll (a wake-up of its key), a live query's stream (a wake-up of its key, parts before its
last one) or an event stream (a wake-up, in fan-out rounds, parts before its last one). The
kinds and their states are data (`TRANSITIONS`: (state, move) -> next state, one table per
kind), as h11 writes a connection's: a move that is not in its kind's
table raises `InvalidMove`, so a request can never be answered twice, answered after its
client was dropped, sent a part after its last one, or sent a part when it is no stream.

Who moves a request: the waiting room's one thread (readers in paced rounds, wake-ups,
deadlines), the thread that publishes a flush (write acknowledgements), the room's `close`
at shutdown (everything parked is answered with what it has), and the server (`drop`, when
the client is gone or reads too slowly to keep up with a stream). The server also tells a
stream when every part handed over has been sent (`drained`), its flow control.

Streams that share their parts (a group of event streams at one position) are sent by a
`Batch`: while `batch` is set, the room's fan-out round hands the batch, once for all its
members, instead of attempting each; the batch hands one part to the deliverer's `outlet`s
of all of them at once (`WaitingRoom.send_shared`). A part so sent moves no state (a part
leaves a request waiting), and a member whose client does not take it whole leaves the
batch and goes on by itself, with the flow control above.

What may never happen: a worker thread blocked on a parked request (except under a foreign
WSGI server, which iterates the request and so waits in its own thread); a request decided
twice; a part delivered before the previous one was handed to its deliverer; an answer
made for a dropped request handed to anyone.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar
from wsgiref.types import StartResponse, WSGIEnvironment

A = TypeVar("A")


class Signal(Protocol):
    """What a request parked for a commit watches (a database's `CommitSignal`)."""

    @property
    def lsn(self) -> int: ...

    quiet_before: float

    def listen(self, callback: Callable[[], None]) -> None: ...


@dataclass(frozen=True, slots=True)
class Part(Generic[A]):
    """One part of a long-lived answer: handed over, and the request stays parked."""

    answer: A


class Batch(Protocol):
    """Paced streams that take and send one part for all (see the module docstring)."""

    def fan_out(self) -> bool:
        """Send every member the next part they share; True when more is ready already
        (the room runs the batch again in its next round)."""
        ...


class Kind(enum.Enum):
    """What a parked request waits for and how it is answered (its `Traits`, in `TRAITS`)."""

    __hash__ = object.__hash__  # as State's

    ACKNOWLEDGEMENT = "acknowledgement"  # a write, answered once durable
    READER = "reader"  # a change-stream long poll, answered at a commit with news
    LIVE = "live"  # a live query's long poll, attempted when its key is poked
    STREAM = "stream"  # an event stream: parts at commits, heartbeats at its deadlines
    # A live query's stream: a part when its key is poked (unpaced, as a long poll),
    # heartbeats at its deadlines.
    LIVE_STREAM = "live stream"


# The members a per-request path names, read once here: in Python 3.11 a member read off the
# Enum class goes through its metaclass's `__getattr__` hook, about 850 instructions a read
# (`tools/bench/enum_reads.py` counts them); a module's name is one dictionary lookup.
READER = Kind.READER
LIVE = Kind.LIVE
LIVE_STREAM = Kind.LIVE_STREAM


@dataclass(frozen=True, slots=True)
class Traits:
    """How the waiting room treats a kind of parked request."""

    on_commit: bool  # waits on a commit `Signal` (else on a wake-up of its key: `poke`)
    # Answered in rounds: on a commit, its database's `Pace`; woken by its key, the room's
    # fan-out rounds. Unpaced: answered by whoever learns the news first.
    paced: bool
    streaming: bool  # sends parts (`Part`) before its answer


TRAITS: dict[Kind, Traits] = {
    Kind.ACKNOWLEDGEMENT: Traits(on_commit=True, paced=False, streaming=False),
    Kind.READER: Traits(on_commit=True, paced=True, streaming=False),
    Kind.LIVE: Traits(on_commit=False, paced=False, streaming=False),
    Kind.STREAM: Traits(on_commit=False, paced=True, streaming=True),
    Kind.LIVE_STREAM: Traits(on_commit=False, paced=False, streaming=True),
}


class State(enum.Enum):
    # Members are singletons, compared by identity: hashed so too, in C (Enum's own hash is
    # Python code, paid at each move, thus at each part of a thousand streams).
    __hash__ = object.__hash__

    WAITING = "waiting"  # parked: nothing decided, or parts of a stream sent so far
    ANSWERED = "answered"  # its one answer (or a stream's last part) was handed over
    DROPPED = "dropped"  # its client is gone or too slow: nothing more is made for it


class Move(enum.Enum):
    __hash__ = object.__hash__  # as State's

    PART = "part"  # one part of a long-lived answer
    ANSWER = "answer"  # the final answer
    DROP = "drop"  # the server gave up on the client


_ONE_ANSWER: dict[tuple[State, Move], State] = {
    (State.WAITING, Move.ANSWER): State.ANSWERED,
    (State.WAITING, Move.DROP): State.DROPPED,
    (State.ANSWERED, Move.DROP): State.ANSWERED,  # a drop after the end changes nothing
    (State.DROPPED, Move.DROP): State.DROPPED,
}
# (state, move) -> the state after it, by kind: only a stream takes parts.
TRANSITIONS: dict[Kind, dict[tuple[State, Move], State]] = {
    kind: {**_ONE_ANSWER, (State.WAITING, Move.PART): State.WAITING}
    if traits.streaming
    else _ONE_ANSWER
    for kind, traits in TRAITS.items()
}
# By kind: (on_commit, paced, streaming, its transitions), what `Parked.__init__` reads.
_SETUP: dict[Kind, tuple[bool, bool, bool, dict[tuple[State, Move], State]]] = {
    kind: (traits.on_commit, traits.paced, traits.streaming, TRANSITIONS[kind])
    for kind, traits in TRAITS.items()
}
# The members a stream's every part looks at, as module names: found by one dictionary read,
# not through the enum's class (which costs a thousand streams a few hundred microseconds).
_WAITING, _DROPPED, _ANSWERED, _PART = State.WAITING, State.DROPPED, State.ANSWERED, Move.PART
assert all(t[_WAITING, Move.ANSWER] is _ANSWERED for t in TRANSITIONS.values())  # `decide`'s


class InvalidMove(RuntimeError):
    """A parked request was moved in a way its kind and state do not allow (a bug)."""


class WrongKind(ValueError):
    """A parked request was made with a kind that does not fit what it waits on (a bug)."""


def _nothing(*_: object) -> None:
    """`Parked.drained` of a request with no flow control (bound, it takes the request)."""


class Parked(Generic[A]):
    """One parked request, a handle hashed by identity; see the module docstring for its
    life. `signal` is the commit signal of a kind that waits on one (`Traits.on_commit`),
    None for the others (`WrongKind` otherwise)."""

    __hash__ = object.__hash__  # identity, on purpose: see the module docstring

    # What most requests never change, as the class's defaults (an attribute a request
    # sets shadows its default): a long poll's every re-poll makes a Parked, and each store
    # in `__init__` was its cost. The kind's traits, read at every attempt, are attributes
    # of their own, set from `_SETUP`.
    _state: State = State.WAITING
    _answer: A | None = None
    _parts: tuple[A, ...] = ()  # made before a deliverer was in place
    _on_answer: Callable[[A], None] | None = None
    _on_part: Callable[[A], None] | None = None
    _waiter: threading.Event | None = None  # made only for a thread that waits
    # A stream's flow control: `drained()`, called by the sending thread when the server
    # sent every part handed over so far, so that it makes the next only then and a reader
    # that stops reading costs bounded memory. It is the request's `on_drained` itself (a
    # hundred streams' sends of one commit call no frame between), else nothing.
    drained: Callable[[], None] = _nothing
    # The deliverer's handle on its client (the server's connection; opaque here), for
    # parts handed to many at once; and the batch that sends this request's parts now.
    outlet: object = None
    batch: Batch | None = None

    def __init__(
        self,
        signal: Signal | None,
        seen: int,
        attempt: Callable[[int], A | Part[A] | None],
        on_timeout: Callable[[], A | Part[A] | None],  # None: nothing now, it waits on
        deadline: float,
        release: Callable[[], None],
        *,
        kind: Kind,
        at_close: Callable[[], A] | None = None,
        on_drained: Callable[[], None] | None = None,
    ) -> None:
        on_commit, self.paced, self.streaming, self._moves = _SETUP[kind]
        if on_commit != (signal is not None):
            wants = "a commit signal" if on_commit else "no commit signal"
            raise WrongKind(f"a parked {kind.value} waits on {wants}")
        self.kind = kind
        self.signal = signal
        self.seen = seen  # the durable LSN the last attempt looked at
        self.attempt = attempt
        self.on_timeout = on_timeout
        # At shutdown: the last answer (a stream's closing part); by default `on_timeout`'s.
        self.at_close = at_close or on_timeout
        if on_drained is not None:
            self.drained = on_drained
        self.deadline = deadline
        self._release = release
        self._lock = threading.Lock()

    @property
    def state(self) -> State:
        return self._state

    def _move(self, move: Move) -> State:
        """Apply `move` (the caller holds the lock); InvalidMove when the table has none."""
        after = self._moves.get((self._state, move))
        if after is None:
            state, kind = self._state.value, self.kind.value
            raise InvalidMove(f"a {state} {kind} cannot take {move.value}")
        self._state = after
        return after

    def decide(self, outcome: A | Part[A]) -> bool:
        """Hand over `outcome`; True when the request is now finished (answered)."""
        if isinstance(outcome, Part):
            with self._lock:
                if self._state is _DROPPED:
                    return True
                self._move(_PART)
                deliver = self._on_part
                if deliver is None:  # rare, and few: a tuple grown by one
                    self._parts += (outcome.answer,)
            if deliver is not None:
                deliver(outcome.answer)
            return False
        with self._lock:
            if self._state is not _WAITING:
                return True  # dropped meanwhile, or decided by another thread first
            # (WAITING, ANSWER) -> ANSWERED in every kind's table: `_move`'s look, made here.
            self._state = _ANSWERED
            self._answer = outcome
            callback, waiter = self._on_answer, self._waiter
        self._release()
        if waiter is not None:
            waiter.set()
        if callback is not None:
            callback(outcome)
        return True

    def drop(self) -> None:
        """The client is gone or too slow: make nothing more for it."""
        with self._lock:
            before = self._state
            self._move(Move.DROP)
        if before is _WAITING:
            self._release()

    @property
    def finished(self) -> bool:
        return self._state is not _WAITING

    def wait(self) -> A:
        """Block until answered (a foreign WSGI server's thread); the answer."""
        with self._lock:
            if self._answer is None and self._waiter is None:
                self._waiter = threading.Event()
            waiter = self._waiter
        if waiter is not None:
            waiter.wait()
        assert self._answer is not None
        return self._answer

    def on_ready(
        self,
        on_answer: Callable[[A], None],
        on_part: Callable[[A], None] | None = None,
        outlet: object = None,
    ) -> None:
        """Deliver the answer (and a stream's parts, in order) to these callbacks; `outlet`:
        where the deliverer's shared sends reach this request's client (`send_shared`).

        Parts and the answer made before the call are delivered at once, in order.
        """
        if outlet is not None:
            self.outlet = outlet
        with self._lock:
            parts, self._parts = self._parts, ()
            self._on_part = on_part
            answer = self._answer
            if answer is None:
                self._on_answer = on_answer
        for part in parts:
            if on_part is not None:
                on_part(part)
        if answer is not None:
            on_answer(answer)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> ParkedBody:
        return ParkedBody(self, start_response)


class ParkedBody:
    """The WSGI iterable of a Parked request: iterating it waits for the answer.

    Our server recognises it and parks the connection instead; any other WSGI server
    iterates it, and its thread then waits.
    """

    def __init__(self, parked: Parked[Any], start_response: StartResponse) -> None:
        self.parked = parked
        self._start_response = start_response

    def __iter__(self) -> Iterator[bytes]:
        answer = self.parked.wait()
        self._start_response(answer.status, answer.headers)
        yield answer.body

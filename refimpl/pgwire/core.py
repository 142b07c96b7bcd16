"""The protocol core of one connection: bytes in -> messages, answers -> bytes. No sockets.

    core = ProtocolCore()
    core.receive_data(data)           # what the socket read (b"" when the client closed)
    while (message := core.next_message()) is not None:
        ...                           # answer it
        out += core.send(answer)      # bytes for the socket, the state moved on

The state moves by the table in `states`; a message the state does not allow is an
UnexpectedMessage, bytes that do not decode a MalformedMessage, a message longer than
`max_message_bytes` (`STARTUP_LIMIT` before login) a MessageTooLarge. After any of them the
connection is CLOSED: the caller sends `error_bytes` of it, if it can, and closes.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence

from refimpl.errors import MessageTooLarge, UnexpectedMessage
from refimpl.pgwire import messages as m
from refimpl.pgwire import run_messages
from refimpl.pgwire.states import (
    CLOSED,
    COPY_MESSAGES,
    DELIVER,
    READY,
    RECEIVED,
    SENT,
    UNTYPED,
    State,
)

_LENGTH = struct.Struct("!i")
# Before login a message is a startup packet or a password: a few names and values, as
# PostgreSQL's 10,000-byte cap on the startup packet. A client that has proven nothing
# makes the server hold no more than this (a longer length closes the connection at once).
STARTUP_LIMIT = 10_000
# A message's type byte as the bytes `messages.decode` takes, without slicing the buffer.
_TYPE_BYTES = tuple(bytes([code]) for code in range(256))
_BEFORE_LOGIN = frozenset({State.STARTUP, State.SECURING, State.STARTING, State.AUTHENTICATING})


class ProtocolCore:
    """One connection's protocol state and unread bytes; one thread at a time uses it."""

    def __init__(self, max_message_bytes: int) -> None:
        self.state = State.STARTUP
        self.max_message_bytes = max_message_bytes
        self._buffer = bytearray()
        self._at = 0
        self.client_closed = False
        # Whether the message being answered belongs to the extended protocol: an error
        # answered to it makes the connection skip to the next Sync.
        self._extended = False
        # What `send` has sent: the statements completed since the connection began, and
        # the errors since `take_counts`. The server counts answers by these rather than by
        # walking the bytes again, and takes them only at an error, a close or a scrape.
        self.completed = 0
        self.errors: list[str] = []
        self._taken = 0  # `completed` when `take_counts` last took it
        self._head: run_messages.BindHead | None = None  # of the last run's Bind (`next_run`)

    # -- receiving -----------------------------------------------------------------------

    def receive_data(self, data: bytes) -> None:
        """Bytes the client sent; b"" means it closed its side."""
        if not data:
            self.client_closed = True
            return
        if self._at > 65536 and self._at * 2 > len(self._buffer):
            del self._buffer[: self._at]
            self._at = 0
        self._buffer += data

    def next_message(self) -> m.ClientMessage | None:
        """The next message to answer, or None until more bytes arrive (or after CLOSED)."""
        while self.state is not CLOSED:
            framed = self._next_frame()
            if framed is None:
                return None
            kind, body = framed
            message = m.decode_startup(body) if kind is None else run_messages.decode(kind, body)
            step = RECEIVED.get((self.state, type(message)))
            if step is None:
                state = self.state
                self.state = CLOSED
                raise UnexpectedMessage(
                    f"a {type(message).__name__} message is not allowed while the connection"
                    f" is in its {state.value} state"
                )
            self.state, action = step
            if action is DELIVER:
                if not isinstance(message, COPY_MESSAGES):  # they belong to their COPY
                    self._extended = isinstance(message, m.EXTENDED)
                return message
        return None

    def _next_frame(self) -> tuple[bytes | None, bytes] | None:
        buffer, at = self._buffer, self._at
        untyped = self.state is not READY and self.state in UNTYPED  # READY: no hash
        head = 4 if untyped else 5
        if len(buffer) - at < head:
            return None
        kind = None if untyped else _TYPE_BYTES[buffer[at]]
        (length,) = _LENGTH.unpack_from(buffer, at + head - 4)
        limit = self._limit()
        if length < 4 or length > limit:
            self.state = CLOSED
            if length < 4:
                raise UnexpectedMessage(f"a message length of {length} is impossible")
            raise MessageTooLarge(
                f"a message of {length} bytes is longer than the server takes ({limit});"
                " send less at once"
            )
        end = at + head - 4 + length
        if len(buffer) < end:
            return None
        body = bytes(buffer[at + head : end])
        self._at = end
        return kind, body

    def next_run(self, runs_together: Callable[[m.Bind], bool]) -> run_messages.Run | None:
        """A prepared statement's run whose messages all wait whole (`run_messages.read_run`:
        Bind, Describe of its portal or none, Execute, Sync), taken at once when the
        connection is READY and `runs_together(bind)`; else None, nothing taken (and
        `next_message` reads them one by one). Its answers go through `send_run`."""
        if self.state is not READY:
            return None
        run = run_messages.read_run(self._buffer, self._at, self.max_message_bytes, self._head)
        if run is None or not runs_together(run[0]):
            return None
        self._at, self._head = run[3], run[4]
        self._extended = False  # it ends with its Sync
        return run

    def next_known_run(self, frame: run_messages.RunFrame) -> list[bytes | None] | None:
        """The values of a run framed as `frame` (`run_messages.read_known`: a client's
        runs of one prepared statement), taken at once when it waits whole and the
        connection is READY; else None, nothing taken. Its answers go through `sent_run`
        or `send_run`."""
        if self.state is not READY:
            return None
        try:
            known = frame.read(self._buffer, self._at, self.max_message_bytes)
        except struct.error:  # values past the Bind's end: read one by one, told so
            return None
        if known is None:
            return None
        self._at = known[1]
        self._extended = False  # it ends with its Sync
        return known[0]

    def send_run(self, answers: Sequence[m.ServerMessage]) -> bytes:
        """The bytes of a run's answers (`next_run`), which leave the state READY: those of
        its messages up to an error, the error, and the Sync's ReadyForQuery."""
        completed, errors = m.CommandComplete, m.ErrorResponse
        out = []
        for answer in answers:
            kind = type(answer)
            if kind is completed:
                self.completed += 1
            elif kind is errors:
                assert isinstance(answer, m.ErrorResponse)
                if not answer.notice:
                    self.errors.append(answer.code)
            out.append(answer.encode())
        return b"".join(out)

    def sent_run(self, data: bytes) -> bytes:
        """`data`, a run's answers made as bytes (`Conversation.run_known`): counted as
        `send_run` counts them (one CommandComplete, no error); the state stays READY."""
        self.completed += 1
        return data

    def drained(self) -> bool:
        """Whether every byte received has been read (no part of a message waits)."""
        return self._at >= len(self._buffer)

    def has_message(self) -> bool:
        """Whether a whole message waits to be read (or the client closed its side)."""
        available = len(self._buffer) - self._at
        if available < 4:  # every message has its length's 4 bytes at least: nearly always
            return self.client_closed
        if self.client_closed:
            return True
        if self.state is READY:  # logged in, between queries: typed, any length
            if available < 5:
                return False
            (length,) = _LENGTH.unpack_from(self._buffer, self._at + 1)
            return length < 4 or length > self.max_message_bytes or available >= 1 + length
        head = 4 if self.state in UNTYPED else 5
        if available < head:
            return False
        (length,) = _LENGTH.unpack_from(self._buffer, self._at + head - 4)
        # A length out of bounds counts as whole: reading it raises the error at once.
        return length < 4 or length > self._limit() or available >= head - 4 + length

    def _limit(self) -> int:
        """The longest message the state takes: small until the client has logged in."""
        if self.state is READY:  # nearly always: no enum hashed (a Python call)
            return self.max_message_bytes
        return STARTUP_LIMIT if self.state in _BEFORE_LOGIN else self.max_message_bytes

    # -- sending -------------------------------------------------------------------------

    def send(self, message: m.ServerMessage) -> bytes:
        """The bytes of an answer; the state moves on. An answer the state forbids is a bug."""
        kind = type(message)
        if kind is m.CommandComplete:
            self.completed += 1
        elif kind is m.ErrorResponse:
            assert isinstance(message, m.ErrorResponse)
            if not message.notice:
                self.errors.append(message.code)
            if self._error_moved_state(message):
                return message.encode()
        next_state = SENT.get((self.state, type(message)))
        if next_state is None:
            raise AssertionError(f"{type(message).__name__} sent in state {self.state.value}")
        self.state = next_state
        return message.encode()

    def _error_moved_state(self, error: m.ErrorResponse) -> bool:
        """Whether sending `error` moved the state itself (else the table moves it)."""
        if error.notice:
            return True  # a notice never moves the state
        if self.state is State.READY and self._extended:
            self.state = State.SKIPPING
            return True
        if self.state is State.COPY_IN:  # the COPY failed: its remaining data is dropped
            self.state = State.SKIPPING if self._extended else State.READY
            return True
        return False

    def failed(self, code: str) -> None:
        """An error sent without `send` (`error_bytes`): counted among the errors sent."""
        self.errors.append(code)

    def take_counts(self) -> tuple[int, list[str]]:
        """The statements completed and the SQLSTATEs of the errors sent since the last
        call (notices not counted), then starts again from none."""
        counts = self.completed - self._taken, self.errors
        self._taken, self.errors = self.completed, []
        return counts

    def untaken(self) -> int:
        """The statements completed since the last `take_counts` (from any thread: one
        being counted now is read as it was or as it is)."""
        return self.completed - self._taken

    def secured(self) -> None:
        """The TLS handshake after 'S' is done: the startup goes on, encrypted."""
        if self.state is not State.SECURING:
            raise AssertionError(f"TLS established in state {self.state.value}")
        self.state = State.STARTUP

    def close(self) -> None:
        self.state = CLOSED


def error_bytes(code: str, message: str) -> bytes:
    """A FATAL error for a connection that ends (a protocol error, a refused start)."""
    return m.ErrorResponse(code, message, severity="FATAL").encode()

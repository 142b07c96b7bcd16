"""A walsender: one slot's changes streamed to its client in CopyBoth mode, on a thread.

After START_REPLICATION the connection leaves the server's workers: this loop owns its
socket until the stream ends. It sends each durable transaction the slot shows as XLogData
messages (`w`: start and end position, the server's time, the plugin's bytes), sends a
primary keepalive (`k`) after `KEEPALIVE_S` of quiet (asking for a reply once the client
has been silent for `REPLY_WANTED_S`), and reads the client's standby status updates
(`r`: written, flushed, applied positions): the flushed one, never past what was sent, is
the slot's confirmed position, durable before the next message is read. A client silent
for `TIMEOUT_S` (PostgreSQL's wal_sender_timeout) is dropped. The client's CopyDone ends
the stream cleanly (CopyDone, CommandComplete, ReadyForQuery) and gives the connection
back to SQL; anything else (Terminate, a closed socket, the server stopping) ends it.
"""

from __future__ import annotations

import logging
import os
import select
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Protocol

from refimpl.engine import replication_positions as positions
from refimpl.engine.replication import wakeups
from refimpl.engine.replication.decoding import read_transactions
from refimpl.engine.statements.replication_slots import SlotStore
from refimpl.engine.storage.database import Database
from refimpl.errors import Gone, KdbError
from refimpl.pgwire import messages as m
from refimpl.pgwire.replication_plugins import OutputPlugin
from refimpl.pgwire.types import PG_EPOCH_MICROS

log = logging.getLogger("refimpl.pgwire")

KEEPALIVE_S = 10.0
REPLY_WANTED_S = 30.0
TIMEOUT_S = 60.0
POLL_S = 0.2
TRANSACTIONS_PER_READ = 256
SEND_BYTES = 256 * 1024  # XLogData gathered before one send
_HEAD = struct.Struct("!ci")
_XLOG = struct.Struct("!cicqqq")  # CopyData ('d', length) of an XLogData (w, start, end, time)
_K = struct.Struct("!cqqB")
_R = struct.Struct("!qqqqB")
LOST_DETAIL = "This slot has been invalidated because it exceeded the maximum reserved size."


class StreamSocket(Protocol):
    """The connection's socket as a walsender uses it."""

    def fileno(self) -> int: ...

    def send(self, data: bytes) -> None:
        """All of `data` now (blocking; raises OSError)."""

    def recv_now(self) -> bytes | None:
        """What the client sent, without waiting: None when nothing, b"" when it closed."""

    @property
    def stopping(self) -> bool:
        """The server is stopping."""


@dataclass(slots=True)
class Ending:
    """How a stream ended: `back` (bytes read after the client's CopyDone) when the
    connection goes back to SQL, None when it closes."""

    back: bytes | None


class _Bell:
    """The eventfd a walsender's poll wakes on. A commit (or the server's stop) may ring it
    from another thread just after the walsender let it go: ringing a closed bell does
    nothing, instead of writing to a file descriptor the process may have given out again."""

    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._lock = threading.Lock()
        self._open = True

    def ring(self) -> None:
        with self._lock:
            if self._open:
                os.eventfd_write(self.fd, 1)

    def close(self) -> None:
        with self._lock:
            self._open = False
            os.close(self.fd)


def now_pg() -> int:
    """The server's time as PostgreSQL sends it: microseconds since 2000-01-01."""
    return time.time_ns() // 1000 - PG_EPOCH_MICROS


class Walsender:
    def __init__(
        self,
        database: Database,
        slots: SlotStore,
        slot: str,
        plugin: OutputPlugin,
        shows: Callable[[str], bool],
        start: int,
        pid: int,
    ) -> None:
        self.database = database
        self.slots = slots
        self.slot = slot
        self.plugin = plugin
        self.shows = shows
        self.pid = pid
        resume = positions.resume(start)
        self.done_lsn = resume.done_lsn  # every transaction up to it is sent
        self.skip = resume.skip  # changes of the next one the client already has
        self.sent = start  # the last position sent (a keepalive's walEnd)
        self._announced: int | None = None  # the position the last keepalive told
        self._in = bytearray()
        self._last_heard = time.monotonic()
        self._last_sent = time.monotonic()

    def run(self, sock: StreamSocket) -> Ending:
        """Stream until the stream ends; the slot is let go in every case."""
        bell = _Bell()
        wake = bell.fd
        ring: Callable[[], None] = bell.ring
        wakeups.listen(self.database, ring)
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        poller.register(wake, select.POLLIN)
        try:
            sock.send(b"W" + struct.pack("!ibh", 7, 0, 0))  # CopyBothResponse, text, 0 columns
            return self._loop(sock, poller, wake)
        except OSError:
            return Ending(None)
        except KdbError as error:
            code = "55000" if isinstance(error, Gone) else "XX000"
            _goodbye(sock, m.ErrorResponse(code, error.message))
            return Ending(None)
        finally:
            wakeups.forget(self.database, ring)
            bell.close()
            self.slots.release(self.slot, self.pid)

    def _loop(self, sock: StreamSocket, poller: select.poll, wake: int) -> Ending:
        while not sock.stopping:
            if self.database.log.durable_lsn > self.done_lsn:
                self._send_changes(sock)
                ended = self._read_client(sock)
                if ended is not None:
                    return ended
                continue
            if self._announced != self.sent:
                # Caught up: the client learns at once how far it has everything (as
                # PostgreSQL's walsender does), so `pg_recvlogical --endpos` ends promptly.
                self._keepalive(sock, False)
                self._announced = self.sent
            quiet = time.monotonic() - self._last_sent
            # A short wait at most: a stopping server is noticed soon.
            waited = poller.poll(min(max(0.0, KEEPALIVE_S - quiet), POLL_S) * 1000 + 1)
            if any(fd == wake for fd, _ in waited):
                try:
                    os.eventfd_read(wake)
                except BlockingIOError:
                    pass
            ended = self._read_client(sock)
            if ended is not None:
                return ended
            silent = time.monotonic() - self._last_heard
            if silent > TIMEOUT_S:
                log.info(
                    "replication client of slot %s sent nothing for %.0f s; dropped",
                    self.slot,
                    silent,
                )
                return Ending(None)
            if time.monotonic() - self._last_sent >= KEEPALIVE_S:
                self._keepalive(sock, silent > REPLY_WANTED_S)
        _goodbye(
            sock,
            m.ErrorResponse(
                "57P01", "terminating connection: the server is stopping", severity="FATAL"
            ),
        )
        return Ending(None)

    def _send_changes(self, sock: StreamSocket) -> None:
        out: list[bytes] = []
        size = 0
        now = now_pg()
        for txn in read_transactions(
            self.database, self.done_lsn, self.shows, TRANSACTIONS_PER_READ
        ):
            skip = self.skip if txn.lsn == self.done_lsn + 1 else 0
            messages = self.plugin.transaction(txn, skip)
            if messages:
                # Every message framed by C-level maps: no Python step per row.
                ats, payloads = zip(*messages, strict=True)
                lengths = list(map(len, payloads))
                heads = map(
                    _XLOG.pack, repeat(b"d"), map((29).__add__, lengths), repeat(b"w"),
                    ats, ats, repeat(now),
                )  # fmt: skip
                out.append(b"".join(chain.from_iterable(zip(heads, payloads, strict=True))))
                size += sum(lengths) + 30 * len(lengths)
            self.done_lsn, self.skip = txn.lsn, 0
            self.sent = positions.end_of(txn.lsn)
            if size >= SEND_BYTES:
                sock.send(b"".join(out))
                out, size = [], 0
                self._last_sent = time.monotonic()
        if out:
            sock.send(b"".join(out))
            self._last_sent = time.monotonic()

    def _keepalive(self, sock: StreamSocket, reply: bool) -> None:
        body = _K.pack(b"k", self.sent, now_pg(), 1 if reply else 0)
        sock.send(_HEAD.pack(b"d", len(body) + 4) + body)
        self._last_sent = time.monotonic()

    def _read_client(self, sock: StreamSocket) -> Ending | None:
        """Take the client's messages read so far; an Ending when they end the stream."""
        data = sock.recv_now()
        if data == b"":
            return Ending(None)
        if data:
            self._in += data
            self._last_heard = time.monotonic()
        buffer = self._in
        while len(buffer) >= 5:
            kind, length = _HEAD.unpack_from(buffer)
            if length < 4 or length > 1 << 20:
                return self._violation(sock, f"a message length of {length} is impossible here")
            if len(buffer) < length + 1:
                break
            body = bytes(buffer[5 : length + 1])
            del buffer[: length + 1]
            if kind == b"d":
                ended = self._copy_data(sock, body)
                if ended is not None:
                    return ended
            elif kind == b"c":
                # The slot is let go before the answer: a client that reads ReadyForQuery
                # may at once drop or take the slot from another connection.
                self.slots.release(self.slot, self.pid)
                sock.send(
                    m.CopyDone().encode()
                    + m.CommandComplete("START_REPLICATION").encode()
                    + m.ReadyForQuery("I").encode()
                )
                return Ending(bytes(buffer))
            elif kind == b"X":
                return Ending(None)
            else:
                return self._violation(sock, f"a {kind!r} message is not allowed while streaming")
        return None

    def _copy_data(self, sock: StreamSocket, body: bytes) -> Ending | None:
        if body[:1] == b"r" and len(body) == 1 + _R.size:
            _written, flushed, _applied, _time, reply = _R.unpack_from(body, 1)
            if flushed:
                # Never past what was sent: a confirmation ahead of it would skip changes.
                self.slots.confirm(self.slot, min(flushed, self.sent))
            if reply:
                self._keepalive(sock, False)
            return None
        if body[:1] == b"h":  # a hot standby feedback: nothing to keep for it here
            return None
        return self._violation(sock, f"unexpected message type {body[:1]!r} in CopyData")

    @staticmethod
    def _violation(sock: StreamSocket, why: str) -> Ending:
        _goodbye(
            sock, m.ErrorResponse("08P01", f"invalid standby message: {why}", severity="FATAL")
        )
        return Ending(None)


def _goodbye(sock: StreamSocket, error: m.ErrorResponse) -> None:
    try:
        sock.send(error.encode())
    except OSError:
        pass

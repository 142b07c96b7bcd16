"""COPY through the protocol's copy messages.

`COPY ... FROM STDIN`: the server answers CopyInResponse and the client sends its rows as
CopyData, then CopyDone (or CopyFail, which copies nothing). The engine's COPY reader
(`refimpl.engine.copying`) pulls the data from a `CopyInStream` one CopyData at a time as it
parses, so the input is never held whole: what is kept is the converted rows, which the one
transaction of the COPY installs at the end. `COPY ... TO STDOUT`: CopyOutResponse, one row
a CopyData (sent in batches as they are encoded), CopyDone. Both then answer
`CommandComplete` with `COPY n`.

Formats, rights, errors at their line and column and the one transaction are the engine's,
as for `/exec`; this module only moves bytes between it and the connection, through a `Wire`.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from typing import IO, Protocol, cast

from refimpl.engine import copying
from refimpl.engine.query.deadlines import Steps
from refimpl.engine.result import Result, message_result
from refimpl.engine.session import Session
from refimpl.errors import CopyFailed
from refimpl.pgwire import messages as m

SEND_BYTES = 64 * 1024  # COPY TO rows sent at a time


class Wire(Protocol):
    """The connection as a COPY uses it while the statement runs."""

    def send(self, answers: Sequence[m.ServerMessage]) -> None:
        """Send `answers` now, after everything answered before them."""

    def start_answer(self) -> None:
        """What `send` sends from now on is one answer with a deadline as a whole
        (`refimpl.netpool.send_limits`): a client too slow to take it is dropped."""

    def end_answer(self) -> None:
        """The answer `start_answer` began is sent."""

    def next_copy_message(self) -> m.CopyData | m.CopyDone | m.CopyFail:
        """The client's next copy message, waiting for it. Raises ProtocolError when the
        client closes or sends no data in time (the connection then ends)."""


class CopyInStream(io.RawIOBase):
    """The CopyData of one COPY FROM STDIN as a binary stream; EOF at CopyDone.

    CopyInResponse goes out at the first read, after `before` (the answers so far): by then
    the engine has checked the table and the caller's right, whose errors come without the
    client ever entering copy mode.
    """

    def __init__(
        self,
        wire: Wire,
        sql: str,
        columns: Callable[[], int],
        before: list[m.ServerMessage],
        steps: Steps,
    ) -> None:
        super().__init__()
        self._steps = steps  # each CopyData's rows are a step of its user's long work
        self._wire = wire
        self._sql = sql
        self._columns = columns
        self._before = before
        self.started = False
        self.ended = False
        self._left = memoryview(b"")  # a CopyData longer than the reader asked for

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        if not self._left:
            self._left = memoryview(self._next())
        size = min(len(buffer), len(self._left))
        buffer[:size] = self._left[:size]
        self._left = self._left[size:]
        return size

    def _next(self) -> bytes:
        if not self.started:
            self.started = True
            binary = copying.copy_is_binary(self._sql)
            self._wire.send([*self._before, m.CopyInResponse(self._columns(), binary)])
            self._before.clear()
        while not self.ended:
            message = self._wire.next_copy_message()
            if isinstance(message, m.CopyData):
                if message.data:
                    self._steps.next()
                    return message.data
                continue
            self.ended = True
            if isinstance(message, m.CopyFail):
                raise CopyFailed(
                    f"COPY FROM STDIN failed: the client sent CopyFail"
                    f" ({message.message}); nothing was copied"
                )
        return b""

    def finish(self) -> None:
        """Drop what the client sends up to its CopyDone or CopyFail: the engine's reader
        stops at a `\\.` line, and the COPY ends there (PostgreSQL ignores what follows)."""
        self._left = memoryview(b"")
        while self.started and not self.ended:
            self.ended = not isinstance(self._wire.next_copy_message(), m.CopyData)


def copy_in(
    session: Session,
    sql: str,
    wire: Wire,
    columns: Callable[[], int],
    before: list[m.ServerMessage],
) -> Result:
    """Run `COPY ... FROM STDIN` with the client's CopyData as its rows."""
    # Its turns end with the answer's (`Link.answer_pending`), on the same thread.
    stream = CopyInStream(wire, sql, columns, before, Steps(session.principal.name))
    result = copying.copy_in(session, sql, cast(IO[bytes], stream))
    stream.finish()
    return result


def copy_out(session: Session, sql: str, wire: Wire, before: list[m.ServerMessage]) -> Result:
    """Run `COPY ... TO STDOUT`, its data sent as it is encoded, a chunk of rows at a time;
    CopyDone ends it (the caller sends CommandComplete)."""
    output = copying.copy_out(session, sql)
    wire.start_answer()
    try:
        wire.send([*before, m.CopyOutResponse(len(output.columns), output.format.binary)])
        before.clear()
        # One row a CopyData, as PostgreSQL sends them (psycopg reads a row from each), sent
        # in batches of about SEND_BYTES.
        batch: list[m.ServerMessage] = []
        size = 0
        steps = Steps(session.principal.name)  # each batch is a step of its user's long work
        for row in output.chunks(rows_per_chunk=1):
            batch.append(m.CopyData(row))
            size += len(row)
            if size >= SEND_BYTES:
                steps.next()
                wire.send(batch)
                batch, size = [], 0
    finally:
        wire.end_answer()
    before.extend(batch)
    before.append(m.CopyDone())
    count = len(output.rows)
    return message_result(sql, f"{count} row(s) copied", count)

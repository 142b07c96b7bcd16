"""The messages every prepared statement's run sends (Bind, Describe, Execute, Close, Sync,
Flush), read in a few C calls each rather than field by field.

`decode(kind, body)` answers what `messages.decode` answers for every body: each short
reader gives up (None, or a struct/Unicode error) on a body that is not exactly its shape,
and `messages.decode` then reads it and names what is wrong in its MalformedMessage.

`read_run` reads a whole run at once, as clients send it: Bind, a Describe of its portal or
not, Execute and Sync, for the unnamed portal, all in the buffer already.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from types import CodeType, FunctionType
from typing import NamedTuple

from refimpl.pgwire import messages as m

_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_SYNC, _FLUSH = m.Sync(), m.Flush()
_KINDS = {0x53: "S", 0x50: "P"}


class BindHead(NamedTuple):
    """A Bind's bytes up to its values (portal, statement, format codes, count of values)
    and what they say: a client's runs of one prepared statement send the same each time,
    so `read_run` reads them once for a connection (`ProtocolCore` keeps the last)."""

    head: bytes
    portal: str
    statement: str
    formats: tuple[int, ...]
    values: int  # how many values follow


def _fast_bind(body: bytes) -> m.Bind | None:
    head = _bind_head(body)
    return None if head is None else _bind_values(body, head)


def _bind_head(body: bytes) -> BindHead | None:
    portal_end = body.find(0)
    at = body.find(0, portal_end + 1) + 1
    if portal_end < 0 or not at:
        return None
    portal = body[:portal_end].decode() if portal_end else ""  # the unnamed one, mostly
    statement = body[portal_end + 1 : at - 1].decode()
    # Format codes: none or one (all alike), as nearly every client sends them, without a call.
    (count,) = _INT16.unpack_from(body, at)
    if count == 0:
        formats: tuple[int, ...] = ()
        at += 2
    elif count == 1:
        formats = _INT16.unpack_from(body, at + 2)
        at += 4
    else:
        formats, at = _fast_int16s(body, at)
    (count,) = _INT16.unpack_from(body, at)
    at += 2
    if count < 0:
        return None
    return BindHead(body[:at], portal, statement, formats, count)


def _bind_values(body: bytes, head: BindHead) -> m.Bind | None:
    """The Bind of `body`, which begins with `head`: its values and result format codes."""
    at = len(head.head)
    params: list[bytes | None] = []
    append, size, unpack_length = params.append, len(body), _INT32.unpack_from
    for _ in range(head.values):
        (length,) = unpack_length(body, at)
        at += 4
        if length < 0:
            append(None)
        else:
            end = at + length
            if end > size:
                return None
            append(body[at:end])
            at = end
    (count,) = _INT16.unpack_from(body, at)
    if count == 0 and at + 2 == size:
        result_formats: tuple[int, ...] = ()
    elif count == 1 and at + 4 == size:
        result_formats = _INT16.unpack_from(body, at + 2)
    else:
        result_formats, at = _fast_int16s(body, at)
        if at != size:
            return None
    return m.Bind(head.portal, head.statement, head.formats, tuple(params), result_formats)


def _fast_int16s(body: bytes, at: int) -> tuple[tuple[int, ...], int]:
    """A count and that many 2-byte integers at `at`, and where they end (struct.error or
    ValueError past the body or for a negative count)."""
    (count,) = _INT16.unpack_from(body, at)
    if count == 0:
        return (), at + 2
    if count == 1:
        return _INT16.unpack_from(body, at + 2), at + 4
    return struct.unpack_from(f"!{count}h", body, at + 2), at + 2 + 2 * count


def _fast_kind_and_name(
    body: bytes, cls: type[m.Describe] | type[m.Close]
) -> m.ClientMessage | None:
    kind = _KINDS.get(body[0]) if body else None
    if kind is None or body.find(0, 1) != len(body) - 1:
        return None
    return cls(kind, body[1:-1].decode())


def _fast_execute(body: bytes) -> m.ClientMessage | None:
    end = body.find(0)
    if end < 0 or end != len(body) - 5:
        return None
    return m.Execute(body[:end].decode(), _INT32.unpack_from(body, end + 1)[0])


_FAST: dict[bytes, Callable[[bytes], m.ClientMessage | None]] = {
    b"B": _fast_bind,
    b"D": lambda body: _fast_kind_and_name(body, m.Describe),
    b"E": _fast_execute,
    b"C": lambda body: _fast_kind_and_name(body, m.Close),
    b"S": lambda body: None if body else _SYNC,
    b"H": lambda body: None if body else _FLUSH,
}


# A run's messages after its Bind, for the unnamed portal: Describe, Execute (its row limit
# follows), Sync.
_DESCRIBE_PORTAL = b"D\0\0\0\x06P\0"
_EXECUTE_PORTAL = b"E\0\0\0\x09\0"
_SYNC_FRAME = b"S\0\0\0\x04"
# A run: its Bind, whether its portal is described, Execute's row limit, where it ends, and
# its Bind's head (for the next run of the connection's).
Run = tuple[m.Bind, bool, int, int, BindHead]
# A run read by its frame (`read_known`): its values, as they came, and where it ends.
KnownRun = tuple[list[bytes | None], int]


def read_run(buffer: bytearray, at: int, limit: int, known: BindHead | None = None) -> Run | None:
    """The run of a prepared statement framed in `buffer` from `at`: a Bind of the unnamed
    portal (at most `limit` bytes), a Describe of that portal or none, an Execute of it and
    a Sync, all whole. None for anything else, or anything not exactly so: the messages are
    then read one at a time, whose errors say what is wrong. `known`: the head of the
    connection's last run's Bind, not read again when this Bind begins with it."""
    if len(buffer) - at < 5 or buffer[at] != 0x42:  # 'B'
        return None
    (length,) = _INT32.unpack_from(buffer, at + 1)
    if length < 4 or length > limit:
        return None
    end = at + 1 + length
    described = buffer[end : end + 7] == _DESCRIBE_PORTAL
    execute = end + 7 if described else end
    if (
        buffer[execute : execute + 6] != _EXECUTE_PORTAL
        or buffer[execute + 10 : execute + 15] != _SYNC_FRAME
    ):
        return None
    body = bytes(buffer[at + 5 : end])
    try:
        head = known if known is not None and body.startswith(known.head) else _bind_head(body)
        bind = None if head is None else _bind_values(body, head)
    except (struct.error, ValueError):
        return None
    if bind is None or bind.portal:
        return None
    assert head is not None
    (max_rows,) = _INT32.unpack_from(buffer, execute + 6)
    return bind, described, max_rows, execute + 15, head


class RunFrame(NamedTuple):
    """What every run of one prepared statement sends alike when a client runs it again and
    again (its values aside): its Bind's head, the count of values, and the bytes after them
    up to the Sync's end (`tail`: the Bind's result format codes, `bind_rest` bytes, then a
    Describe of the portal or none, an Execute with no row limit, a Sync); `read` is
    `read_known` of this frame."""

    head: bytes
    values: int
    tail: bytes
    bind_rest: int
    read: Callable[[bytearray, int, int], KnownRun | None]


def run_frame(head: BindHead, result_formats: tuple[int, ...], described: bool) -> RunFrame:
    """The frame of the runs of the unnamed portal with no row limit whose Bind begins with
    `head` and ends with `result_formats` (as the client sent them: none, one or several)."""
    codes = struct.pack(f"!h{len(result_formats)}h", len(result_formats), *result_formats)
    described_part = _DESCRIBE_PORTAL if described else b""
    tail = codes + described_part + _EXECUTE_PORTAL + b"\0\0\0\0" + _SYNC_FRAME
    read = _known_reader(head.head, head.values, tail, len(codes))
    return RunFrame(head.head, head.values, tail, len(codes), read)


# A reader's values are read by code unrolled a line a value up to this many; beyond, by a
# loop: unrolled code grows with them (a Bind may carry 65,535: hundreds of megabytes and
# seconds of the interpreter lock to compile).
_UNROLLED = 32


def _known_reader(
    head: bytes, count: int, tail: bytes, bind_rest: int
) -> Callable[[bytearray, int, int], KnownRun | None]:
    """`read_known` for one frame, its loop over the values unrolled (a line a value, as
    `row_writers` does for a row's columns): a client's every run pays for its values
    alone. The code is made once for a count of values (`_unrolled`), the frame's own bytes
    and sizes its globals: a connection whose runs change frames (two prepared statements
    run in turn) makes a frame at every run, and a compile costs more than the run."""
    if count > _UNROLLED:
        return functools.partial(_read_looped, head, count, tail, bind_rest)
    scope = {
        "HEAD": head,
        "TAIL": tail,
        "START": 5 + len(head),
        "REST": bind_rest,
        "TAIL_SIZE": len(tail),
        "unpack_from": _INT32.unpack_from,
        "bytes": bytes,
    }
    return FunctionType(_unrolled(count), scope)


@functools.cache  # at most `_UNROLLED` + 1 code objects, made once each
def _unrolled(count: int) -> CodeType:
    """The code of a reader of `count` values; its text holds only numbers and numbered
    names, nothing a client sent."""
    lines = [
        "def read(buffer, at, limit):",
        "    if not buffer.startswith(HEAD, at + 5) or buffer[at] != 0x42:",
        "        return None",
        "    (length,) = unpack_from(buffer, at + 1)",
        "    p = at + START",
    ]
    for n in range(count):
        lines += [
            "    (size,) = unpack_from(buffer, p)",
            "    p += 4",
            "    if size < 0:",
            f"        v{n} = None",
            "    else:",
            f"        v{n} = bytes(buffer[p : p + size])",
            "        p += size",
        ]
    lines += [
        "    if p + REST != at + 1 + length or length > limit:",
        "        return None",
        "    if not buffer.startswith(TAIL, p):",
        "        return None",
        f"    return [{', '.join(f'v{n}' for n in range(count))}], p + TAIL_SIZE",
    ]
    module = compile("\n".join(lines), "<pgwire run reader>", "exec")
    return next(const for const in module.co_consts if isinstance(const, CodeType))


def _read_looped(
    head: bytes, count: int, tail: bytes, bind_rest: int, buffer: bytearray, at: int, limit: int
) -> KnownRun | None:
    """`read_known` for a frame of more than `_UNROLLED` values, by a loop over them."""
    if not buffer.startswith(head, at + 5) or buffer[at] != 0x42:  # 'B'
        return None
    (length,) = _INT32.unpack_from(buffer, at + 1)
    p = at + 5 + len(head)
    values: list[bytes | None] = []
    for _ in range(count):
        (size,) = _INT32.unpack_from(buffer, p)
        p += 4
        if size < 0:
            values.append(None)
        else:
            values.append(bytes(buffer[p : p + size]))
            p += size
    if p + bind_rest != at + 1 + length or length > limit:
        return None
    if not buffer.startswith(tail, p):
        return None
    return values, p + len(tail)


def read_known(buffer: bytearray, at: int, limit: int, frame: RunFrame) -> KnownRun | None:
    """The values of a run framed in `buffer` from `at` exactly as `frame` says (whole, its
    Bind at most `limit` bytes) and where the run ends; None for anything else (then
    `read_run`, or the messages one at a time, read it). struct.error where a value's
    length is past the buffer's end (a Bind whose values run past its own)."""
    return frame.read(buffer, at, limit)


def decode(kind: bytes, body: bytes) -> m.ClientMessage:
    """One typed message, as `messages.decode` reads it (MalformedMessage alike)."""
    fast = _FAST.get(kind)
    if fast is not None:
        try:
            message = fast(body)
        except (struct.error, ValueError):  # UnicodeDecodeError too: messages.decode names it
            message = None
        if message is not None:
            return message
    return m.decode(kind, body)

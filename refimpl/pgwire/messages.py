"""The messages of the protocol: what a client sends (decoded into dataclasses) and what the
server answers (dataclasses that encode themselves to bytes).

A client message after the startup is a type byte, a 4-byte big-endian length that counts
itself, and the body; the startup packets (StartupMessage, SSLRequest, GSSENCRequest,
CancelRequest) have no type byte. Every decoding failure is a `MalformedMessage` naming the
message; nothing here reads a socket.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from refimpl.errors import MalformedMessage, UnsupportedProtocol

PROTOCOL_3_0 = 196608  # 3 << 16
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_HEAD = struct.Struct("!ci")


# --- client messages --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SslRequest:
    pass


@dataclass(frozen=True, slots=True)
class GssEncRequest:
    pass


@dataclass(frozen=True, slots=True)
class CancelRequest:
    process_id: int
    secret_key: int


@dataclass(frozen=True, slots=True)
class Startup:
    """The startup message's parameters: `user`, `database`, `application_name`, ..."""

    parameters: dict[str, str]


@dataclass(frozen=True, slots=True)
class Password:
    password: str


@dataclass(frozen=True, slots=True)
class Query:
    """The simple query protocol: one text, possibly several statements."""

    text: str


@dataclass(frozen=True, slots=True)
class Parse:
    name: str
    text: str
    param_types: tuple[int, ...]


@dataclass(slots=True)  # not frozen: one is made a run (frozen, 1 us more); never changed
class Bind:
    portal: str
    statement: str
    param_formats: tuple[int, ...]
    params: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Describe:
    kind: str  # 'S' a prepared statement, 'P' a portal
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    portal: str
    max_rows: int  # 0: all


@dataclass(frozen=True, slots=True)
class Close:
    kind: str  # 'S' or 'P'
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    pass


@dataclass(frozen=True, slots=True)
class Flush:
    pass


@dataclass(frozen=True, slots=True)
class Terminate:
    pass


@dataclass(frozen=True, slots=True)
class CopyData:
    """Rows of a COPY, either way: a client's COPY FROM STDIN data, the server's COPY TO."""

    data: bytes

    def encode(self) -> bytes:
        return _frame(b"d", self.data)


@dataclass(frozen=True, slots=True)
class CopyDone:
    """The end of a COPY's data, either way."""

    def encode(self) -> bytes:
        return _frame(b"c", b"")


@dataclass(frozen=True, slots=True)
class CopyFail:
    message: str


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """The legacy fast-path function call: decoded only to be refused."""


ClientMessage = (
    SslRequest
    | GssEncRequest
    | CancelRequest
    | Startup
    | Password
    | Query
    | Parse
    | Bind
    | Describe
    | Execute
    | Close
    | Sync
    | Flush
    | Terminate
    | CopyData
    | CopyDone
    | CopyFail
    | FunctionCall
)

# Messages of the extended protocol: after an error the server skips them up to a Sync.
EXTENDED = (Parse, Bind, Describe, Execute, Close, Flush)


class _Reader:
    """Fields of one message body, in order; any overrun is a MalformedMessage."""

    def __init__(self, body: bytes, what: str) -> None:
        self.body = body
        self.at = 0
        self.what = what

    def _fail(self, why: str) -> MalformedMessage:
        return MalformedMessage(f"the {self.what} message is malformed: {why}")

    def int16(self) -> int:
        if self.at + 2 > len(self.body):
            raise self._fail("it ends inside a 2-byte integer")
        (value,) = _INT16.unpack_from(self.body, self.at)
        self.at += 2
        return value

    def int32(self) -> int:
        if self.at + 4 > len(self.body):
            raise self._fail("it ends inside a 4-byte integer")
        (value,) = _INT32.unpack_from(self.body, self.at)
        self.at += 4
        return value

    def byte(self) -> str:
        if self.at >= len(self.body):
            raise self._fail("it ends before a one-byte field")
        value = chr(self.body[self.at])
        self.at += 1
        return value

    def string(self) -> str:
        end = self.body.find(b"\0", self.at)
        if end < 0:
            raise self._fail("a text field has no terminating zero byte")
        raw = self.body[self.at : end]
        self.at = end + 1
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self._fail("a text field is not valid UTF-8") from None

    def count(self) -> int:
        value = self.int16()
        if value < 0:
            raise self._fail(f"a count is negative ({value})")
        return value

    def int16s(self) -> tuple[int, ...]:
        """A count, then that many 2-byte integers (format codes), read at once."""
        count = self.count()
        end = self.at + 2 * count
        if end > len(self.body):
            raise self._fail("it ends inside a 2-byte integer")
        values = struct.unpack_from(f"!{count}h", self.body, self.at)
        self.at = end
        return values

    def raw(self, length: int) -> bytes:
        if self.at + length > len(self.body):
            raise self._fail("a value is longer than the message")
        value = self.body[self.at : self.at + length]
        self.at += length
        return value

    def rest(self) -> bytes:
        value = self.body[self.at :]
        self.at = len(self.body)
        return value

    def end(self) -> None:
        if self.at != len(self.body):
            raise self._fail(f"{len(self.body) - self.at} byte(s) follow its last field")


def decode_startup(body: bytes) -> ClientMessage:
    """A packet without a type byte: its first field is the protocol version or a code."""
    reader = _Reader(body, "startup")
    code = reader.int32()
    if code == SSL_REQUEST:
        reader.end()
        return SslRequest()
    if code == GSSENC_REQUEST:
        reader.end()
        return GssEncRequest()
    if code == CANCEL_REQUEST:
        message = CancelRequest(reader.int32(), reader.int32())
        reader.end()
        return message
    if code >> 16 != 3:
        raise UnsupportedProtocol(
            f"protocol version {code >> 16}.{code & 0xFFFF} is not served; this server speaks"
            " 3.0 (every PostgreSQL client since 7.4)"
        )
    parameters: dict[str, str] = {}
    while True:
        name = reader.string()
        if not name:
            break
        parameters[name] = reader.string()
    reader.end()
    return Startup(parameters)


def _query(r: _Reader) -> ClientMessage:
    return Query(r.string())


def _parse(r: _Reader) -> ClientMessage:
    name, text = r.string(), r.string()
    return Parse(name, text, tuple(r.int32() for _ in range(r.count())))


def _bind(r: _Reader) -> ClientMessage:
    portal, statement = r.string(), r.string()
    formats = r.int16s()
    params: list[bytes | None] = []
    for _ in range(r.count()):
        length = r.int32()
        params.append(None if length < 0 else r.raw(length))
    return Bind(portal, statement, formats, tuple(params), r.int16s())


def _kind_and_name(r: _Reader, cls: type[Describe] | type[Close]) -> ClientMessage:
    kind = r.byte()
    if kind not in ("S", "P"):
        raise r._fail(f"its kind must be 'S' or 'P', not {kind!r}")
    return cls(kind, r.string())


def _execute(r: _Reader) -> ClientMessage:
    return Execute(r.string(), r.int32())


_DECODERS = {
    b"Q": _query,
    b"P": _parse,
    b"B": _bind,
    b"D": lambda r: _kind_and_name(r, Describe),
    b"E": _execute,
    b"C": lambda r: _kind_and_name(r, Close),
    b"S": lambda r: Sync(),
    b"H": lambda r: Flush(),
    b"X": lambda r: Terminate(),
    b"p": lambda r: Password(r.string()),
    b"d": lambda r: CopyData(r.rest()),
    b"c": lambda r: CopyDone(),
    b"f": lambda r: CopyFail(r.string()),
    b"F": lambda r: (r.rest(), FunctionCall())[1],
}
_NAMES = {
    b"Q": "Query", b"P": "Parse", b"B": "Bind", b"D": "Describe", b"E": "Execute",
    b"C": "Close", b"S": "Sync", b"H": "Flush", b"X": "Terminate", b"p": "PasswordMessage",
    b"d": "CopyData", b"c": "CopyDone", b"f": "CopyFail", b"F": "FunctionCall",
}  # fmt: skip


def decode(kind: bytes, body: bytes) -> ClientMessage:
    """One typed message; MalformedMessage for an unknown type or a body that does not fit."""
    decoder = _DECODERS.get(kind)
    if decoder is None:
        raise MalformedMessage(f"unknown message type {kind!r}")
    reader = _Reader(body, _NAMES[kind])
    message = decoder(reader)
    reader.end()
    return message


# --- server messages --------------------------------------------------------------------


def _frame(kind: bytes, body: bytes) -> bytes:
    return _HEAD.pack(kind, len(body) + 4) + body


def _cstr(text: str) -> bytes:
    return text.encode("utf-8") + b"\0"


@dataclass(frozen=True, slots=True)
class AuthenticationOk:
    def encode(self) -> bytes:
        return _frame(b"R", _INT32.pack(0))


@dataclass(frozen=True, slots=True)
class AuthenticationCleartextPassword:
    def encode(self) -> bytes:
        return _frame(b"R", _INT32.pack(3))


@dataclass(frozen=True, slots=True)
class ParameterStatus:
    name: str
    value: str

    def encode(self) -> bytes:
        return _frame(b"S", _cstr(self.name) + _cstr(self.value))


@dataclass(frozen=True, slots=True)
class BackendKeyData:
    process_id: int
    secret_key: int

    def encode(self) -> bytes:
        return _frame(b"K", _INT32.pack(self.process_id) + _INT32.pack(self.secret_key))


@dataclass(frozen=True, slots=True)
class ReadyForQuery:
    status: str  # 'I' idle, 'T' in a transaction, 'E' in a failed transaction

    def encode(self) -> bytes:
        return b"Z\0\0\0\5" + self.status.encode("ascii")  # sent after every query


@dataclass(frozen=True, slots=True)
class FieldDescription:
    name: str
    type_oid: int
    type_size: int
    format: int = 0  # 0 text, 1 binary
    table_oid: int = 0
    column_number: int = 0
    type_modifier: int = -1


_FIELD = struct.Struct("!ihihih")


@dataclass(frozen=True, slots=True)
class RowDescription:
    fields: tuple[FieldDescription, ...]
    # Encoded once: a prepared statement sends its one RowDescription at every run.
    _encoded: bytes = field(default=b"", init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        parts = [_INT16.pack(len(self.fields))]
        for f in self.fields:
            parts.append(_cstr(f.name))
            parts.append(
                _FIELD.pack(
                    f.table_oid, f.column_number, f.type_oid, f.type_size, f.type_modifier, f.format
                )
            )
        object.__setattr__(self, "_encoded", _frame(b"T", b"".join(parts)))

    def encode(self) -> bytes:
        return self._encoded


@dataclass(frozen=True, slots=True)
class DataRows:
    """Several DataRow messages at once: `rows` of values, each column's value (unless None,
    sent as NULL) made bytes by that column's one of `encoders`, chosen once per
    RowDescription rather than per value."""

    rows: Sequence[Sequence[object]]
    encoders: tuple[Callable[[object], bytes], ...]
    write: Callable[[Sequence[Sequence[object]]], bytes] | None = None  # row_writers'

    def encode(self) -> bytes:
        if self.write is not None:
            return self.write(self.rows)
        count = _INT16.pack(len(self.encoders))
        out = []
        for row in self.rows:
            parts = [count]
            for value, encode in zip(row, self.encoders, strict=True):
                if value is None:
                    parts.append(b"\xff\xff\xff\xff")
                else:
                    data = encode(value)
                    parts.append(_INT32.pack(len(data)))
                    parts.append(data)
            body = b"".join(parts)
            out.append(_HEAD.pack(b"D", len(body) + 4))
            out.append(body)
        return b"".join(out)


@dataclass(frozen=True, slots=True)
class CommandComplete:
    tag: str

    def encode(self) -> bytes:
        return _frame(b"C", _cstr(self.tag))


@dataclass(frozen=True, slots=True)
class EmptyQueryResponse:
    def encode(self) -> bytes:
        return _frame(b"I", b"")


@dataclass(frozen=True, slots=True)
class ErrorResponse:
    """An error (or, as NoticeResponse, a notice): severity, SQLSTATE, message, extras.

    `position` is the 1-based character offset in the query text, as PostgreSQL gives it.
    """

    code: str
    message: str
    severity: str = "ERROR"
    position: int | None = None
    hint: str | None = None
    notice: bool = False

    def encode(self) -> bytes:
        parts = [
            b"S",
            _cstr(self.severity),
            b"V",
            _cstr(self.severity),
            b"C",
            _cstr(self.code),
            b"M",
            _cstr(self.message),
        ]
        if self.position is not None:
            parts += [b"P", _cstr(str(self.position))]
        if self.hint:
            parts += [b"H", _cstr(self.hint)]
        parts.append(b"\0")
        return _frame(b"N" if self.notice else b"E", b"".join(parts))


@dataclass(frozen=True, slots=True)
class ParseComplete:
    def encode(self) -> bytes:
        return b"1\0\0\0\4"


@dataclass(frozen=True, slots=True)
class BindComplete:
    def encode(self) -> bytes:
        return b"2\0\0\0\4"


@dataclass(frozen=True, slots=True)
class CloseComplete:
    def encode(self) -> bytes:
        return b"3\0\0\0\4"


@dataclass(frozen=True, slots=True)
class NoData:
    def encode(self) -> bytes:
        return b"n\0\0\0\4"


@dataclass(frozen=True, slots=True)
class PortalSuspended:
    def encode(self) -> bytes:
        return b"s\0\0\0\4"


@dataclass(frozen=True, slots=True)
class ParameterDescription:
    type_oids: tuple[int, ...]

    def encode(self) -> bytes:
        return _frame(
            b"t",
            _INT16.pack(len(self.type_oids)) + b"".join(_INT32.pack(oid) for oid in self.type_oids),
        )


@dataclass(frozen=True, slots=True)
class CopyInResponse:
    """The server waits for COPY FROM STDIN data: `columns` fields a row, text or binary."""

    columns: int
    binary: bool = False

    def encode(self) -> bytes:
        return _frame(b"G", _copy_formats(self.columns, self.binary))


@dataclass(frozen=True, slots=True)
class CopyOutResponse:
    """COPY TO STDOUT data follows: `columns` fields a row, text or binary."""

    columns: int
    binary: bool = False

    def encode(self) -> bytes:
        return _frame(b"H", _copy_formats(self.columns, self.binary))


def _copy_formats(columns: int, binary: bool) -> bytes:
    # The overall format (0 for text and CSV both, 1 for binary), then the same for each column.
    return bytes([binary]) + _INT16.pack(columns) + _INT16.pack(int(binary)) * columns


@dataclass(frozen=True, slots=True)
class NotificationResponse:
    """A notification on `channel` with its `payload`, from the session of process id `pid`."""

    pid: int
    channel: str
    payload: str

    def encode(self) -> bytes:
        return _frame(b"A", _INT32.pack(self.pid) + _cstr(self.channel) + _cstr(self.payload))


@dataclass(frozen=True, slots=True)
class SslAccepted:
    """The one-byte answer 'S' to an SSLRequest: the TLS handshake comes next."""

    def encode(self) -> bytes:
        return b"S"


@dataclass(frozen=True, slots=True)
class SslRefused:
    """The one-byte answer 'N' to an SSLRequest or GSSENCRequest: go on in plain text."""

    def encode(self) -> bytes:
        return b"N"


ServerMessage = (
    AuthenticationOk | AuthenticationCleartextPassword | ParameterStatus | BackendKeyData
    | ReadyForQuery | RowDescription | DataRows | CommandComplete | EmptyQueryResponse
    | ErrorResponse | ParseComplete | BindComplete | CloseComplete | NoData | PortalSuspended
    | ParameterDescription | CopyInResponse | CopyOutResponse | CopyData | CopyDone
    | NotificationResponse | SslAccepted | SslRefused
)  # fmt: skip

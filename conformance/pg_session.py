"""The PostgreSQL protocol (3.0) spoken by the runner itself, for `pg` steps.

A `pg` step sends frontend messages written as JSON and compares every backend message a
client sees, also written as JSON, with its `expect`. The runner speaks the messages
itself (no driver in between hides a field), and imports nothing of the implementation
under test.

Frontend messages, one JSON value each:

| JSON | message |
|---|---|
| `{"Query": "SQL"}` | Query |
| `{"Parse": {"name": "", "sql": "SQL", "types": [OID, ...]}}` | Parse |
| `{"Bind": {"portal", "statement", "params", "param_formats", "result_formats"}}` | Bind |
| `{"Describe": {"statement": NAME}}`, `{"Describe": {"portal": NAME}}` | Describe |
| `{"Execute": {"portal": "", "max_rows": 0}}` | Execute |
| `{"Close": {"statement": NAME}}`, `{"Close": {"portal": NAME}}` | Close |
| `{"CopyData": "TEXT"}`, `{"CopyFail": "REASON"}` | CopyData, CopyFail |
| `"Sync"`, `"Flush"`, `"CopyDone"`, `"Terminate"` | those messages |
| `{"StandbyStatusUpdate": {...}}` | CopyData `r` of a replication client (pg_replication.py) |

A Bind's `params` are text, `null`, or `{"binary": "HEX"}`, whose bytes (`"ffffffff"`, an
`int4`'s -1) are sent as they are. The parameter format codes (0 text, 1 binary) are
`param_formats` when the step gives them, sent exactly so (one for all, one per parameter,
or a wrong count on purpose); otherwise one code 0 when every parameter is text, and one
code per parameter (1 for each binary one) when one is binary. `result_formats` are 0
(text) or 1 (binary) per column, or one for all.

Backend messages become objects with a `type` and the fields a client reads:
`ErrorResponse` and `NoticeResponse` (`severity`, `code`, `message`), `RowDescription`
(`fields`: `name`, `type_oid`, `format`), `DataRow` (`values`: text, `null`, or `\\x...`
hex for a binary column), `CommandComplete` (`tag`), `ReadyForQuery` (`status`: I, T or
E), `ParameterDescription` (`types`), `CopyInResponse`/`CopyOutResponse` (`format`,
`columns`), `CopyData` (`data`, as text), `NotificationResponse` (`channel`, `payload`;
not the sender's process id, which differs each run), and the bare `ParseComplete`, `BindComplete`,
`CloseComplete`, `NoData`, `PortalSuspended`, `EmptyQueryResponse`, `CopyDone`.
`ParameterStatus` messages are left out (servers differ in which they send, and when).

A replication connection (`replication=database` in its startup message) answers
`START_REPLICATION` with `CopyBothResponse` (`format`, `columns`); from then on, until the
stream ends, each CopyData of the server is read by its kind as `XLogData` or
`PrimaryKeepalive` (`conformance/pg_replication.py`). The stream sends no ReadyForQuery
until the client's CopyDone, so a step reading it says when to stop: `until`, a message
type, ends the step's reading at the first message of that type.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from conformance.pg_replication import (
    ReplicationMessageError,
    decode_stream_data,
    standby_status_update,
)

PROTOCOL_3 = 196608
_BARE = {
    "Sync": b"S",
    "Flush": b"H",
    "CopyDone": b"c",
    "Terminate": b"X",
}
_BARE_BACKEND = {
    b"1": "ParseComplete",
    b"2": "BindComplete",
    b"3": "CloseComplete",
    b"n": "NoData",
    b"s": "PortalSuspended",
    b"I": "EmptyQueryResponse",
    b"c": "CopyDone",
}
# A FATAL error ends the connection: nothing more is read after it.
_FATAL = "FATAL"
# ErrorResponse and NoticeResponse fields a conformance check reads (S, C, M).
_ERROR_FIELDS = {b"S": "severity", b"C": "code", b"M": "message"}


class PgStepError(Exception):
    """A `pg` step could not be carried out (bad message JSON, no answer in time)."""


def split_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` (the host may be `[v6]`) as host and port; ValueError when it is not."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{address!r} is not HOST:PORT, e.g. 127.0.0.1:5432")
    return host.strip("[]"), int(port)


def _cstring(text: str) -> bytes:
    return text.encode("utf-8") + b"\0"


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def encode_frontend(value: Any) -> bytes:
    """The bytes of one frontend message written as JSON (see the module's table)."""
    if isinstance(value, str):
        if value not in _BARE:
            raise PgStepError(f"unknown bare message {value!r}; one of {sorted(_BARE)}")
        return _message(_BARE[value], b"")
    if not isinstance(value, dict) or len(value) != 1:
        raise PgStepError(f"a message is one of {sorted(_BARE)} or an object of one key: {value!r}")
    ((name, fields),) = value.items()
    if name == "Query":
        return _message(b"Q", _cstring(str(fields)))
    if name == "StandbyStatusUpdate":
        try:
            return _message(b"d", standby_status_update(fields))
        except ReplicationMessageError as exc:
            raise PgStepError(str(exc)) from None
    if name in ("CopyData", "CopyFail"):
        data = str(fields).encode("utf-8")
        return _message(b"d", data) if name == "CopyData" else _message(b"f", data + b"\0")
    if not isinstance(fields, dict):
        raise PgStepError(f"{name} takes an object of fields, not {fields!r}")
    if name == "Parse":
        types = [int(t) for t in fields.get("types", [])]
        body = _cstring(fields.get("name", "")) + _cstring(fields["sql"])
        body += struct.pack(f"!h{len(types)}I", len(types), *types)
        return _message(b"P", body)
    if name == "Bind":
        return _message(b"B", _bind_body(fields))
    if name in ("Describe", "Close"):
        which = "statement" if "statement" in fields else "portal"
        tag = b"S" if which == "statement" else b"P"
        return _message(b"D" if name == "Describe" else b"C", tag + _cstring(fields[which]))
    if name == "Execute":
        body = _cstring(fields.get("portal", "")) + struct.pack("!i", fields.get("max_rows", 0))
        return _message(b"E", body)
    raise PgStepError(f"unknown message {name!r}")


def _param_bytes(param: Any) -> bytes | None:
    """A Bind parameter's bytes as sent: None for NULL, `{"binary": HEX}` those bytes, any
    other value its text in UTF-8."""
    if param is None:
        return None
    if isinstance(param, dict):
        if set(param) != {"binary"} or not isinstance(param["binary"], str):
            raise PgStepError(f'a parameter is text, null or {{"binary": "HEX"}}, not {param!r}')
        try:
            return bytes.fromhex(param["binary"])
        except ValueError:
            raise PgStepError(f"{param['binary']!r} is not hex digits, e.g. 00000001") from None
    return str(param).encode("utf-8")


def _param_formats(fields: dict[str, Any], params: list[Any]) -> list[int]:
    """The parameter format codes sent: `param_formats` exactly as given; without it one
    code 0 (all in text) when no parameter is binary, else one code per parameter."""
    if "param_formats" in fields:
        return [int(f) for f in fields["param_formats"]]
    if not any(isinstance(param, dict) for param in params):
        return [0]
    return [1 if isinstance(param, dict) else 0 for param in params]


def _bind_body(fields: dict[str, Any]) -> bytes:
    params = fields.get("params", [])
    param_formats = _param_formats(fields, params)
    formats = [int(f) for f in fields.get("result_formats", [])]
    body = _cstring(fields.get("portal", "")) + _cstring(fields.get("statement", ""))
    body += struct.pack(f"!h{len(param_formats)}h", len(param_formats), *param_formats)
    body += struct.pack("!h", len(params))
    for param in params:
        data = _param_bytes(param)
        if data is None:
            body += struct.pack("!i", -1)
        else:
            body += struct.pack("!i", len(data)) + data
    return body + struct.pack(f"!h{len(formats)}h", len(formats), *formats)


def decode_backend(kind: bytes, body: bytes, binary: list[bool]) -> dict[str, Any] | None:
    """One backend message as JSON (None for a ParameterStatus). `binary` is the formats of
    the current row description's columns, kept across calls by the caller."""
    if kind in _BARE_BACKEND:
        return {"type": _BARE_BACKEND[kind]}
    if kind in (b"E", b"N"):
        fields: dict[str, Any] = {}
        for part in body.rstrip(b"\0").split(b"\0"):
            if part[:1] in _ERROR_FIELDS:
                fields[_ERROR_FIELDS[part[:1]]] = part[1:].decode("utf-8", "replace")
        kind_name = "ErrorResponse" if kind == b"E" else "NoticeResponse"
        return {"type": kind_name, **{k: fields.get(k) for k in _ERROR_FIELDS.values()}}
    if kind == b"Z":
        return {"type": "ReadyForQuery", "status": body[:1].decode()}
    if kind == b"C":
        return {"type": "CommandComplete", "tag": body.rstrip(b"\0").decode("utf-8")}
    if kind == b"T":
        return _row_description(body, binary)
    if kind == b"D":
        return {"type": "DataRow", "values": _data_row(body, binary)}
    if kind == b"t":
        (count,) = struct.unpack_from("!h", body)
        return {
            "type": "ParameterDescription",
            "types": list(struct.unpack_from(f"!{count}I", body, 2)),
        }
    if kind in (b"G", b"H", b"W"):
        overall, columns = struct.unpack_from("!bh", body)
        name = {b"G": "CopyInResponse", b"H": "CopyOutResponse", b"W": "CopyBothResponse"}[kind]
        return {"type": name, "format": overall, "columns": columns}
    if kind == b"d":
        return {"type": "CopyData", "data": body.decode("utf-8", "replace")}
    if kind == b"A":
        end = body.index(b"\0", 4)
        channel, payload = body[4:end], body[end + 1 : -1]
        return {
            "type": "NotificationResponse",
            "channel": channel.decode("utf-8"),
            "payload": payload.decode("utf-8"),
        }
    if kind == b"S":
        return None
    if kind == b"K":
        return {"type": "BackendKeyData"}
    if kind == b"R":
        (code,) = struct.unpack_from("!i", body)
        return {"type": "Authentication", "code": code}
    return {"type": f"unknown message {kind!r}"}


def _row_description(body: bytes, binary: list[bool]) -> dict[str, Any]:
    (count,) = struct.unpack_from("!h", body)
    at, fields = 2, []
    binary.clear()
    for _ in range(count):
        end = body.index(b"\0", at)
        name = body[at:end].decode("utf-8")
        _table, _column, type_oid, _size, _modifier, fmt = struct.unpack_from(
            "!IhIhih", body, end + 1
        )
        at = end + 1 + 18
        fields.append({"name": name, "type_oid": type_oid, "format": fmt})
        binary.append(fmt == 1)
    return {"type": "RowDescription", "fields": fields}


def _data_row(body: bytes, binary: list[bool]) -> list[str | None]:
    (count,) = struct.unpack_from("!h", body)
    at = 2
    values: list[str | None] = []
    for index in range(count):
        (length,) = struct.unpack_from("!i", body, at)
        at += 4
        if length < 0:
            values.append(None)
            continue
        data = body[at : at + length]
        at += length
        is_binary = index < len(binary) and binary[index]
        values.append("\\x" + data.hex() if is_binary else data.decode("utf-8", "replace"))
    return values


@dataclass
class PgConnection:
    """One client connection, logged in (or refused: `refused` holds the server's answer)."""

    sock: socket.socket
    timeout: float
    refused: list[dict[str, Any]] | None = None
    # How XLogData payloads read: "pgoutput" decodes them, anything else reads them as text.
    plugin: str | None = None
    streaming: bool = False  # in CopyBoth mode: CopyData is read as replication messages
    _buffer: bytes = b""
    _closed: bool = False

    @classmethod
    def open(
        cls,
        host: str,
        port: int,
        user: str,
        password: str,
        database: str,
        timeout: float,
        replication: str | None = None,
    ) -> PgConnection:
        """Connect and log in with a cleartext password (the token); with `replication`,
        that startup parameter (`database`: a logical replication connection)."""
        sock = socket.create_connection((host, port), timeout=timeout)
        conn = cls(sock, timeout)
        params = _cstring("user") + _cstring(user) + _cstring("database") + _cstring(database)
        if replication is not None:
            params += _cstring("replication") + _cstring(replication)
        body = struct.pack("!i", PROTOCOL_3) + params + b"\0"
        sock.sendall(struct.pack("!i", len(body) + 4) + body)
        answer: list[dict[str, Any]] = []
        while True:
            message = conn._read_one([])
            if message is None:
                continue
            if message["type"] == "Authentication":
                if message["code"] in (3, 5):  # cleartext or MD5 asked: send the password
                    sock.sendall(_message(b"p", _cstring(password)))
                continue
            if message["type"] == "ReadyForQuery":
                return conn
            if message["type"] == "BackendKeyData":
                continue
            answer.append(message)
            if message["type"] == "ErrorResponse":
                conn.refused = answer
                return conn

    def exchange(self, messages: Iterable[Any], until: str | None = None) -> list[dict[str, Any]]:
        """Send the messages at once; the backend messages until each Query and Sync sent
        has its ReadyForQuery (or, after a Terminate, until the server closes), and, with
        `until`, a message of that type came. A Query whose answer is a CopyBothResponse
        (START_REPLICATION) has its ReadyForQuery only after the stream's CopyDone: it is
        waited for only when this step sends a CopyDone for that stream too. A FATAL error ends the
        reading (the server closes the connection after it)."""
        sent = list(messages)
        frames = [encode_frontend(m) for m in sent]
        waits = sum(1 for m in sent if m == "Sync" or (isinstance(m, dict) and "Query" in m))
        copy_dones = sent.count("CopyDone")  # each ends the stream open before it
        if self.streaming and copy_dones:
            waits += 1  # the START_REPLICATION's ReadyForQuery, after its CopyDone
            copy_dones -= 1
        terminate = "Terminate" in sent
        seen = until is None
        self.sock.sendall(b"".join(frames))
        answer: list[dict[str, Any]] = []
        binary: list[bool] = []
        while waits > 0 or terminate or not seen:
            message = self._read_one(binary, eof_ok=terminate)
            if message is None:
                if terminate and self._closed:
                    break
                continue
            answer.append(message)
            kind = message["type"]
            seen = seen or kind == until
            if kind == "CopyBothResponse":
                self.streaming = True
                if copy_dones:
                    copy_dones -= 1
                else:
                    waits -= 1
            elif kind == "ReadyForQuery":
                self.streaming = False
                waits -= 1
            elif kind == "ErrorResponse" and message.get("severity") == _FATAL:
                self.streaming = False
                break
        return answer

    def _whole_message_length(self) -> int | None:
        """The length of the first buffered message when the buffer holds all of it."""
        if len(self._buffer) < 5:
            return None
        (length,) = struct.unpack_from("!i", self._buffer, 1)
        return length if len(self._buffer) >= 1 + length else None

    def _read_one(self, binary: list[bool], eof_ok: bool = False) -> dict[str, Any] | None:
        deadline = time.monotonic() + self.timeout
        late = f"no whole message from the server within {self.timeout:g} s"
        length = self._whole_message_length()
        while length is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PgStepError(late)
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except TimeoutError:
                raise PgStepError(late) from None
            if not chunk:
                if eof_ok:
                    self._closed = True
                    return None
                raise PgStepError("the server closed the connection")
            self._buffer += chunk
            length = self._whole_message_length()
        kind, body = self._buffer[:1], self._buffer[5 : 1 + length]
        self._buffer = self._buffer[1 + length :]
        if kind == b"d" and self.streaming:
            return decode_stream_data(body, self.plugin)
        return decode_backend(kind, body, binary)

    def close(self) -> None:
        """Say goodbye (Terminate) and close; never raises."""
        try:
            self.sock.sendall(_message(b"X", b""))
        except OSError:
            pass
        self.sock.close()

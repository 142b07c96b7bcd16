"""`pg` steps on a replication connection: CopyBoth, XLogData, keepalives, status updates.

A small scripted walsender stands for an implementation under test: it logs a client in
only with `replication=database`, answers START_REPLICATION with CopyBothResponse and a
scripted stream, answers a standby status update that asks for a reply with a keepalive
telling the flushed position it read, and ends the stream on CopyDone. Each test makes one
field of it lie, and the step that reads that field must fail. (The examples of
spec/replication.md run against refimpl itself in the live suite.)
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.cases import example_from_json, normalize_http
from conformance.pg_replication import (
    PG_EPOCH_MICROS,
    decode_pgoutput,
    decode_stream_data,
    lsn_text,
    parse_lsn,
)
from conformance.pg_session import PgStepError, encode_frontend
from conformance.results import FAILED, PASSED
from conformance.runner import Runner, RunOptions
from tests.conformance.fake_http import ADMIN

NOW = 849_724_259_188_115  # a server time, microseconds since 2000-01-01


def _message(kind: bytes, body: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _ready(status: bytes) -> bytes:
    return _message(b"Z", status)


def _complete(tag: str) -> bytes:
    return _message(b"C", tag.encode() + b"\0")


def _error(code: str, message: str, severity: str = "ERROR") -> bytes:
    return _message(b"E", f"S{severity}\0C{code}\0M{message}\0\0".encode())


def _xlog(position: int, payload: bytes) -> bytes:
    return _message(b"d", b"w" + struct.pack("!qqq", position, position, NOW) + payload)


def _keepalive(position: int, reply: bool = False) -> bytes:
    return _message(b"d", b"k" + struct.pack("!qqB", position, NOW, 1 if reply else 0))


def _begin(final: int, xid: int) -> bytes:
    return b"B" + struct.pack("!qqI", final, NOW, xid)


def _commit(end: int) -> bytes:
    return b"C" + struct.pack("!Bqqq", 0, end, end, NOW)


def _relation(oid: int) -> bytes:
    columns = b"\x01id\0" + struct.pack("!Ii", 23, -1) + b"\x00v\0" + struct.pack("!Ii", 25, -1)
    return b"R" + struct.pack("!I", oid) + b"public\0t\0d" + struct.pack("!h", 2) + columns


def _insert(oid: int, values: list[str | None]) -> bytes:
    body = b"I" + struct.pack("!I", oid) + b"N" + struct.pack("!h", len(values))
    for value in values:
        if value is None:
            body += b"n"
        else:
            body += b"t" + struct.pack("!i", len(value.encode())) + value.encode()
    return body


@dataclass
class Walsender:
    """What the scripted server sends; each field may be made to lie."""

    test_decoding: list[tuple[int, bytes]] = field(
        default_factory=lambda: [
            (0x2000, b"BEGIN 2"),
            (0x2001, b"table public.t: INSERT: id[integer]:1"),
            (0x2FFF, b"COMMIT 2"),
        ]
    )
    pgoutput: list[tuple[int, bytes]] = field(
        default_factory=lambda: [
            (0x2000, _begin(0x2FFF, 2)),
            (0x2001, _relation(16384)),
            (0x2001, _insert(16384, ["1", None])),
            (0x2FFF, _commit(0x2FFF)),
        ]
    )
    caught_up: int = 0x2FFF
    reply_asked: bool = False
    flushed: list[int] = field(default_factory=list)  # the positions the client confirmed


class ScriptedWalsender:
    def __init__(self, script: Walsender) -> None:
        self.script = script
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _read(conn: socket.socket, size: int) -> bytes:
        data = b""
        while len(data) < size:
            chunk = conn.recv(size - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _next(self, conn: socket.socket) -> tuple[bytes, bytes]:
        kind = self._read(conn, 1)
        (length,) = struct.unpack("!i", self._read(conn, 4))
        return kind, self._read(conn, length - 4)

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                (length,) = struct.unpack("!i", self._read(conn, 4))
                words = self._read(conn, length - 4)[4:].split(b"\0")
                startup = dict(zip(words[0::2], words[1::2], strict=False))
                conn.sendall(_message(b"R", struct.pack("!i", 3)))
                kind, body = self._next(conn)
                if kind != b"p" or body.rstrip(b"\0").decode() != ADMIN:
                    conn.sendall(_error("28P01", "password authentication failed", "FATAL"))
                    return
                if startup.get(b"replication") != b"database":
                    conn.sendall(_error("42501", "not a replication connection", "FATAL"))
                    return
                conn.sendall(_message(b"R", struct.pack("!i", 0)) + _ready(b"I"))
                self._commands(conn)
            except (ConnectionError, OSError):
                return

    def _commands(self, conn: socket.socket) -> None:
        while True:
            kind, body = self._next(conn)
            if kind == b"X":
                return
            if kind == b"Q":
                text = body.rstrip(b"\0").decode()
                pgoutput = "proto_version" in text
                stream = self.script.pgoutput if pgoutput else self.script.test_decoding
                out = _message(b"W", struct.pack("!bh", 0, 0))
                out += b"".join(_xlog(at, payload) for at, payload in stream)
                conn.sendall(out + _keepalive(self.script.caught_up, self.script.reply_asked))
            elif kind == b"d" and body[:1] == b"r":
                _written, flushed, _applied, _at, reply = struct.unpack("!qqqqB", body[1:])
                self.script.flushed.append(flushed)
                if reply:
                    conn.sendall(_keepalive(flushed))
            elif kind == b"c":
                conn.sendall(_message(b"c") + _complete("START_REPLICATION") + _ready(b"I"))


def _xlogdata(at: str, data: Any) -> dict[str, Any]:
    return {"type": "XLogData", "start": at, "end": at, "time": {"$match": "int"}, "data": data}


def _keepalive_json(at: str) -> dict[str, Any]:
    return {"type": "PrimaryKeepalive", "end": at, "time": {"$match": "int"}, "reply": False}


def _stream_example(plugin: str, start: str, stream: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "steps": [
            {
                "pg": {
                    "session": "r",
                    "replication": "database",
                    "plugin": plugin,
                    "send": [{"Query": start}],
                    "until": "PrimaryKeepalive",
                },
                "expect": [
                    {"type": "CopyBothResponse", "format": 0, "columns": 0},
                    *stream,
                    _keepalive_json("0/2FFF"),
                ],
            },
            {
                "pg": {
                    "session": "r",
                    "send": [{"StandbyStatusUpdate": {"written": "0/2FFF", "reply": True}}],
                    "until": "PrimaryKeepalive",
                },
                "expect": [_keepalive_json("0/2FFF")],
            },
            {
                "pg": {"session": "r", "send": ["CopyDone"]},
                "expect": [
                    {"type": "CopyDone"},
                    {"type": "CommandComplete", "tag": "START_REPLICATION"},
                    {"type": "ReadyForQuery", "status": "I"},
                ],
            },
        ]
    }


TEST_DECODING = _stream_example(
    "test_decoding",
    "START_REPLICATION SLOT s LOGICAL 0/0",
    [
        _xlogdata("0/2000", "BEGIN 2"),
        _xlogdata("0/2001", "table public.t: INSERT: id[integer]:1"),
        _xlogdata("0/2FFF", "COMMIT 2"),
    ],
)
PGOUTPUT = _stream_example(
    "pgoutput",
    "START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names 'p')",
    [
        _xlogdata(
            "0/2000",
            {"kind": "B", "final_lsn": "0/2FFF", "commit_time": {"$match": "int"}, "xid": 2},
        ),
        _xlogdata(
            "0/2001",
            {
                "kind": "R",
                "relation": {"$match": "int", "capture": "rel"},
                "namespace": "public",
                "name": "t",
                "replica_identity": "d",
                "columns": [
                    {"key": True, "name": "id", "type_oid": 23, "type_modifier": -1},
                    {"key": False, "name": "v", "type_oid": 25, "type_modifier": -1},
                ],
            },
        ),
        _xlogdata(
            "0/2001", {"kind": "I", "relation": {"$match": "same", "as": "rel"}, "new": ["1", None]}
        ),
        _xlogdata(
            "0/2FFF",
            {
                "kind": "C",
                "flags": 0,
                "commit_lsn": "0/2FFF",
                "end_lsn": "0/2FFF",
                "commit_time": {"$match": "int"},
            },
        ),
    ],
)


@pytest.fixture
def fake_http(server: tuple[str, Any]) -> str:
    """The HTTP half (the example's database is made there): the scripted HTTP server."""
    return server[0]


def _run(http_url: str, script: Walsender, example: dict[str, Any]) -> Any:
    pg = ScriptedWalsender(script)
    try:
        options = RunOptions(http_url, ADMIN, timeout=3, pg_address=pg.address)
        data = normalize_http(example, "spec/t.md")
        built = example_from_json(
            {"id": "replication-x", "kind": "http", "source": "spec/t.md", "lines": [1, 2], **data}
        )
        return Runner(options).run(built)
    finally:
        pg.listener.close()


@pytest.mark.parametrize("example", [TEST_DECODING, PGOUTPUT], ids=["test_decoding", "pgoutput"])
def test_an_honest_walsender_passes(fake_http: str, example: dict[str, Any]) -> None:
    script = Walsender()
    result = _run(fake_http, script, example)
    assert result.verdict == PASSED, (result.message, result.diff)
    assert script.flushed == [0x2FFF]  # the status update reached the server as written


def _wrong_start(script: Walsender) -> None:
    script.test_decoding[1] = (0x2002, script.test_decoding[1][1])


def _wrong_text(script: Walsender) -> None:
    script.test_decoding[1] = (0x2001, b"table public.t: INSERT: id[integer]:2")


def _missing_change(script: Walsender) -> None:
    del script.test_decoding[1]


def _reply_asked(script: Walsender) -> None:
    script.reply_asked = True


def _keepalive_behind(script: Walsender) -> None:
    script.caught_up = 0x1FFF


@pytest.mark.parametrize(
    ("lie", "says"),
    [
        (_wrong_start, "0/2002"),
        (_wrong_text, "id[integer]:2"),
        (_missing_change, "COMMIT 2"),
        (_reply_asked, "reply"),
        (_keepalive_behind, "0/1FFF"),
    ],
)
def test_each_lie_of_a_test_decoding_stream_fails(
    fake_http: str, lie: Callable[[Walsender], None], says: str
) -> None:
    script = Walsender()
    lie(script)
    result = _run(fake_http, script, TEST_DECODING)
    assert result.verdict == FAILED
    assert says in result.message + result.diff


@pytest.mark.parametrize(
    ("index", "payload", "says"),
    [
        (0, _begin(0x2FFF, 3), "xid"),
        (1, _relation(16384).replace(b"public\0t\0d", b"public\0t\0f"), "replica_identity"),
        (2, _insert(16385, ["1", None]), "16385"),  # another relation than the R's
        (2, _insert(16384, ["1", "x"]), "new"),
        (3, _commit(0x2FFE), "0/2FFE"),
        (3, _commit(0x2FFF) + b"\0", "trailing"),  # a message longer than its fields
    ],
)
def test_each_lie_of_a_pgoutput_stream_fails(
    fake_http: str, index: int, payload: bytes, says: str
) -> None:
    script = Walsender()
    script.pgoutput[index] = (script.pgoutput[index][0], payload)
    result = _run(fake_http, script, PGOUTPUT)
    assert result.verdict == FAILED
    assert says in result.message + result.diff


def test_the_replication_startup_parameter_is_sent(fake_http: str) -> None:
    example = _stream_example("test_decoding", "START_REPLICATION SLOT s LOGICAL 0/0", [])
    del example["steps"][0]["pg"]["replication"]
    result = _run(fake_http, Walsender(), example)
    assert result.verdict == FAILED and "42501" in result.message + result.diff


def test_messages_are_written_and_read_as_the_protocol_has_them() -> None:
    assert lsn_text(0x2FFF) == "0/2FFF" and lsn_text((1 << 32) | 0xA) == "1/A"
    assert parse_lsn("1/A") == (1 << 32) | 0xA
    with pytest.raises(Exception, match="no position"):
        parse_lsn("12")
    update = encode_frontend({"StandbyStatusUpdate": {"written": "0/3000", "flushed": "0/2FFF"}})
    assert update[:5] == b"d" + struct.pack("!i", 4 + 34)
    written, flushed, applied, at, reply = struct.unpack("!qqqqB", update[6:])
    assert (written, flushed, applied, reply) == (0x3000, 0x2FFF, 0x2FFF, 0)
    assert at > 0  # the client's time, after 2000-01-01
    with pytest.raises(PgStepError, match="written"):
        encode_frontend({"StandbyStatusUpdate": {"flushed": "0/1"}})
    with pytest.raises(PgStepError, match="no field"):
        encode_frontend({"StandbyStatusUpdate": {"written": "0/1", "flush": "0/1"}})
    keepalive = decode_stream_data(b"k" + struct.pack("!qqB", 0x2FFF, NOW, 1), None)
    assert keepalive == {"type": "PrimaryKeepalive", "end": "0/2FFF", "time": NOW, "reply": True}
    broken = decode_stream_data(b"w" + struct.pack("!q", 1), None)
    assert broken["type"] == "CopyData" and "malformed" in broken
    message = b"M\x01" + struct.pack("!q", 0x6001) + b"kdb.ddl\0" + struct.pack("!i", 3) + b"ALT"
    assert decode_pgoutput(message) == {
        "kind": "M",
        "transactional": True,
        "lsn": "0/6001",
        "prefix": "kdb.ddl",
        "content": "ALT",
    }
    update_tuple = b"U" + struct.pack("!I", 7) + b"O" + struct.pack("!h", 1) + b"n"
    update_tuple += b"N" + struct.pack("!h", 2) + b"u" + b"b" + struct.pack("!i", 1) + b"\x01"
    assert decode_pgoutput(update_tuple) == {
        "kind": "U",
        "relation": 7,
        "old": [None],
        "new": [{"unchanged": True}, "\\x01"],
    }
    truncate = b"T" + struct.pack("!IBII", 2, 0, 7, 8)
    assert decode_pgoutput(truncate) == {"kind": "T", "options": 0, "relations": [7, 8]}
    assert decode_pgoutput(b"Z\x01") == {"kind": "Z", "bytes": "01"}
    assert PG_EPOCH_MICROS == 946_684_800_000_000

"""`pg` steps' binary parameters: a Bind sends the bytes and format codes an example gives.

A scripted server answers the extended query: it reads each Bind parameter by its format
code and the type its Parse named, and sends it back as text in a DataRow. Made to read a
binary `int4` as unsigned (a deviation of the kind the mutation catalogue holds), the same
example fails, so an example with binary parameters can catch a server that misreads them.
"""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.case_files import schema_errors
from conformance.cases import example_from_json, normalize_http
from conformance.pg_session import PgStepError, encode_frontend
from conformance.results import FAILED, PASSED
from conformance.runner import Runner, RunOptions
from tests.conformance.fake_http import ADMIN
from tests.conformance.pg_scripted import (
    ScriptedServer,
    complete,
    message,
    ready,
)

INT4 = 23
CHAPTER = Path(__file__).resolve().parents[2] / "spec" / "examples" / "pgwire.json"
Reader = Callable[[bytes], int]


def signed(data: bytes) -> int:
    return int(struct.unpack("!i", data)[0])


def unsigned(data: bytes) -> int:
    return int(struct.unpack("!I", data)[0])


class ExtendedServer(ScriptedServer):
    """Answers Parse, Bind, Execute and Sync; a binary int4 parameter is read by `reader`."""

    def __init__(self, reader: Reader) -> None:
        self.reader = reader
        self.binds: list[bytes] = []  # each Bind's body as received
        super().__init__(lambda sql: b"")

    def _session(self, conn: socket.socket) -> None:
        types: list[int] = []
        values: list[str | None] = []
        while True:
            kind, body = self._next(conn)
            if kind == b"X":
                return
            if kind == b"P":
                at = body.index(b"\0", body.index(b"\0") + 1) + 1
                (count,) = struct.unpack_from("!h", body, at)
                types = list(struct.unpack_from(f"!{count}I", body, at + 2))
                conn.sendall(message(b"1"))
            elif kind == b"B":
                self.binds.append(body)
                values = self._bound(body, types)
                conn.sendall(message(b"2"))
            elif kind == b"E":
                row = struct.pack("!h", len(values))
                for value in values:
                    data = b"" if value is None else value.encode()
                    row += struct.pack("!i", -1 if value is None else len(data)) + data
                conn.sendall(message(b"D", row) + complete("SELECT 1"))
            elif kind == b"S":
                conn.sendall(ready(b"I"))

    def _bound(self, body: bytes, types: list[int]) -> list[str | None]:
        at = body.index(b"\0", body.index(b"\0") + 1) + 1
        (count,) = struct.unpack_from("!h", body, at)
        codes = list(struct.unpack_from(f"!{count}h", body, at + 2))
        at += 2 + 2 * count
        (count,) = struct.unpack_from("!h", body, at)
        at += 2
        values: list[str | None] = []
        for index in range(count):
            (length,) = struct.unpack_from("!i", body, at)
            at += 4
            if length < 0:
                values.append(None)
                continue
            data = body[at : at + length]
            at += length
            code = codes[index] if len(codes) > 1 else (codes[0] if codes else 0)
            if code == 1 and index < len(types) and types[index] == INT4:
                values.append(str(self.reader(data)))
            else:
                values.append(data.hex() if code == 1 else data.decode())
        return values


EXAMPLE: dict[str, Any] = {
    "steps": [
        {
            "pg": {
                "send": [
                    {"Parse": {"name": "", "sql": "SELECT $1, $2, $3", "types": [INT4, 25, 25]}},
                    {"Bind": {"params": [{"binary": "fffffffe"}, "x", None]}},
                    {"Execute": {}},
                    "Sync",
                ]
            },
            "expect": [
                {"type": "ParseComplete"},
                {"type": "BindComplete"},
                {"type": "DataRow", "values": ["-2", "x", None]},
                {"type": "CommandComplete", "tag": "SELECT 1"},
                {"type": "ReadyForQuery", "status": "I"},
            ],
        }
    ]
}


@pytest.fixture
def fake_http(server: tuple[str, Any]) -> str:
    """The HTTP half (the example's database is made there): the scripted HTTP server."""
    return server[0]


def _run(http_url: str, pg: ExtendedServer) -> Any:
    try:
        options = RunOptions(http_url, ADMIN, timeout=5, pg_address=pg.address)
        data = normalize_http(EXAMPLE, "spec/t.md")
        built = example_from_json(
            {"id": "pg-x", "kind": "http", "source": "spec/t.md", "lines": [1, 2], **data}
        )
        return Runner(options).run(built)
    finally:
        pg.close()


def test_a_server_reading_the_binary_parameter_right_passes(fake_http: str) -> None:
    pg = ExtendedServer(signed)
    result = _run(fake_http, pg)
    assert result.verdict == PASSED, (result.message, result.diff)
    # One format code per parameter, the binary one's bytes as given.
    assert struct.pack("!h3h", 3, 1, 0, 0) in pg.binds[0]
    assert struct.pack("!i", 4) + bytes.fromhex("fffffffe") in pg.binds[0]


def test_a_server_reading_a_binary_int4_as_unsigned_fails(fake_http: str) -> None:
    result = _run(fake_http, ExtendedServer(unsigned))
    assert result.verdict == FAILED
    assert "4294967294" in result.message + result.diff


def test_param_formats_are_sent_exactly_as_given() -> None:
    bind = encode_frontend(
        {"Bind": {"params": [{"binary": "01"}, "t"], "param_formats": [1], "result_formats": [1]}}
    )
    params = struct.pack("!i", 1) + b"\x01" + struct.pack("!i", 1) + b"t"
    assert bind[5:] == b"\0\0" + struct.pack("!hhh", 1, 1, 2) + params + struct.pack("!hh", 1, 1)
    # Without binary parameters, one code 0 for all, as before.
    text_only = encode_frontend({"Bind": {"params": ["1"]}})
    assert text_only[5:11] == b"\0\0" + struct.pack("!hh", 1, 0)


def test_a_binary_parameter_that_is_not_hex_is_refused() -> None:
    with pytest.raises(PgStepError, match="not hex digits"):
        encode_frontend({"Bind": {"params": [{"binary": "zz"}]}})
    with pytest.raises(PgStepError, match='"binary": "HEX"'):
        encode_frontend({"Bind": {"params": [{"bytes": "00"}]}})


@pytest.mark.parametrize(("param", "valid"), [({"binary": "0a"}, True), ({"binary": "0g"}, False)])
def test_the_schema_takes_hex_bytes_only(param: dict[str, str], valid: bool) -> None:
    document = json.loads(CHAPTER.read_text(encoding="utf-8"))
    example = document["examples"][0]
    example["steps"] = [{"pg": {"send": [{"Bind": {"params": [param]}}]}, "expect": []}]
    document["examples"] = [example]
    assert (schema_errors(document) == []) is valid

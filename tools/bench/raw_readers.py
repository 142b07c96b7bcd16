"""Lean readers of `changes_read.py`: an HTTP/1.1 keep-alive GET and a PostgreSQL simple
query over raw sockets, each reading its answer into a buffer with `recv_into` and making
nothing of it per row, so that a benchmark's client costs as little as possible and the same
on both sides."""

from __future__ import annotations

import socket
import struct

import harness

PG_READY = b"Z\x00\x00\x00\x05I"  # ReadyForQuery, idle: the end of an answer


class RawHTTP:
    """One keep-alive HTTP/1.1 connection for GETs whose answers have a Content-Length: the
    body read whole into one buffer (`recv_into`), nothing made of it."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        host, _, port = url.split("://", 1)[1].rstrip("/").partition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=600)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        fixed = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.head = f"Host: {host}\r\n{fixed}\r\n".encode("latin-1")
        self.rest = b""

    def get(self, target: str) -> bytearray:
        """The body of a 200 answer to GET `target`; RuntimeError with any other."""
        self.sock.sendall(b"GET " + target.encode("latin-1") + b" HTTP/1.1\r\n" + self.head)
        data = self.rest
        while (end := data.find(b"\r\n\r\n")) < 0:
            data += self.sock.recv(65536)
        head = data[:end].lower()
        status = int(head[9:12])
        at = head.index(b"content-length:") + 15
        size = int(head[at : head.index(b"\r\n", at)])
        body = bytearray(size)
        have = data[end + 4 : end + 4 + size]
        body[: len(have)] = have
        self.rest = data[end + 4 + size :]
        view, filled = memoryview(body), len(have)
        while filled < size:
            got = self.sock.recv_into(view[filled:])
            if not got:
                raise EOFError("the server closed the connection")
            filled += got
        if status != 200:
            raise RuntimeError(f"{status}: {bytes(body[:300])!r}")
        return body

    def close(self) -> None:
        self.sock.close()


class RawPostgres:
    """One PostgreSQL connection over a raw socket (protocol 3.0, trust login): a query's
    answer read into one reused buffer as it comes, occurrences of a pattern counted in it,
    nothing made of it per row. `pid` is the backend's (its BackendKeyData)."""

    def __init__(self, port: int, user: str = "postgres", database: str = "postgres") -> None:
        self.sock = socket.create_connection((harness.LOOPBACK, port), timeout=600)
        params = f"user\0{user}\0database\0{database}\0\0".encode()
        self.sock.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        self.pid = 0
        data = b""
        while True:
            while len(data) < 5 or len(data) < 1 + struct.unpack("!i", data[1:5])[0]:
                data += self.sock.recv(65536)
            kind, size = data[:1], struct.unpack("!i", data[1:5])[0]
            message, data = data[5 : 1 + size], data[1 + size :]
            if kind == b"E":
                raise RuntimeError(f"PostgreSQL refused the login: {message!r}")
            if kind == b"R" and message[:4] != b"\0\0\0\0":
                raise RuntimeError("PostgreSQL asks for a password; the bench logs in by trust")
            if kind == b"K":
                self.pid = struct.unpack("!i", message[:4])[0]
            if kind == b"Z":
                break

    def count(self, sql: str, pattern: bytes) -> int:
        """How many times `pattern` occurs in the answer to the simple query `sql`."""
        text = sql.encode() + b"\0"
        self.sock.sendall(b"Q" + struct.pack("!i", 4 + len(text)) + text)
        buffer = bytearray(1 << 20)
        view = memoryview(buffer)
        keep = len(pattern) - 1  # an occurrence cut by the buffer's end is counted next time
        count = filled = 0
        while True:
            got = self.sock.recv_into(view[filled:])
            if not got:
                raise EOFError("PostgreSQL closed the connection")
            filled += got
            if buffer.endswith(PG_READY, 0, filled):
                return count + buffer.count(pattern, 0, filled)
            if filled == len(buffer):
                count += buffer.count(pattern, 0, filled)
                buffer[:keep] = buffer[filled - keep : filled]
                filled = keep

    def close(self) -> None:
        self.sock.sendall(b"X\0\0\0\4")
        self.sock.close()

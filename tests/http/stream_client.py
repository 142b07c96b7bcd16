"""A small reader of `GET /stream/changes` for tests: events as they arrive, comments too;
the events of a whole answer (`sse_events`: a long poll of /api/subscribe); and the raw
answer over a socket, compressed or not, chunk by chunk (`RawStream`).

`requests` reads the chunked answer as it comes; blocks are parsed as the SSE format says
(one `data` line per event here, as the spec promises).
"""

from __future__ import annotations

import json
import re
import socket
import time
import zlib
from collections.abc import Iterator
from typing import Any

import requests

from tests.http.conftest import ADMIN, Server


def sse_events(text: str) -> list[tuple[str | None, str | None, str | None]]:
    """(id, event name, data line) of each event of a whole answer, `retry:` blocks left out."""
    found = []
    for block in text.split("\n\n"):
        ident = kind = data = None
        for line in block.splitlines():
            if line.startswith("id: "):
                ident = line[4:]
            elif line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if ident is not None or kind is not None:
            found.append((ident, kind, data))
    return found


class EventReader:
    """One open stream. `events` are dicts with `id`, `event`, `data` (parsed) and `retry`."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        self.status = response.status_code
        self.comments: list[str] = []
        self.ended = False
        self._chunks = response.iter_content(chunk_size=None)
        self._text = ""

    def next_event(self) -> dict[str, Any] | None:
        """The next event; None when the stream ended. A read timeout raises."""
        while "\n\n" not in self._text:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.ended = True
                return None
            self._text += chunk.decode("utf-8")
        block, self._text = self._text.split("\n\n", 1)
        event: dict[str, Any] = {}
        for line in block.split("\n"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "":
                self.comments.append(value)
            elif name == "data":
                event["data"] = json.loads(value)
            elif name == "retry":
                event["retry"] = int(value)
            else:
                event[name] = value
        if not event:
            return self.next_event()  # a comment: a heartbeat, or why the stream ended
        return event

    def take(self, count: int) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        while len(events) < count:
            event = self.next_event()
            if event is None:
                raise AssertionError(f"the stream ended after {events}; comments {self.comments}")
            events.append(event)
        return events

    def until_end(self, seconds: float = 10.0) -> list[dict[str, Any]]:
        """Every event until the stream ends (within `seconds`)."""
        deadline = time.monotonic() + seconds
        events: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            event = self.next_event()
            if event is None:
                return events
            events.append(event)
        raise AssertionError(f"the stream did not end within {seconds} s: {events}")

    def close(self) -> None:
        self.response.close()


def open_stream(
    server: Server,
    db: str = "demo",
    *,
    token: Any = ADMIN,
    headers: dict | None = None,
    read_timeout: float = 10.0,
    wait_free: float = 3.0,
    **params: Any,
) -> EventReader:
    """GET /stream/changes (as the admin unless `token` says otherwise; None: no token).

    A 429 is asked again for `wait_free` seconds: streams a test closed count until the
    server sees them go (at their next heartbeat), and tests share the admin's limits.
    """
    deadline = time.monotonic() + wait_free
    while True:
        response = server.get(
            "/stream/changes",
            params={"db": db, **params},
            headers=headers or {},
            stream=True,
            timeout=(10, read_timeout),
            token=token,
        )
        if response.status_code != 429 or time.monotonic() > deadline or "ticket" in params:
            return EventReader(response)
        response.close()
        time.sleep(0.1)


class RawStream:
    """GET /stream/changes over a socket: the answer's head, then its chunks, each inflated
    on its own when the answer is compressed (every part ends on a flush)."""

    def __init__(self, server: Server, accept: str | None, query: str = "") -> None:
        host, port = server.url.split("://", 1)[1].split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        lines = [
            f"GET /stream/changes?db=demo{query} HTTP/1.1",
            f"Host: {host}:{port}",
            f"Authorization: Bearer {server.token}",
        ]
        if accept is not None:
            lines.append(f"Accept-Encoding: {accept}")
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.raw = b""
        while b"\r\n\r\n" not in self.raw:
            self.raw += self._recv()
        head, self.raw = self.raw.split(b"\r\n\r\n", 1)
        self.head = head.decode()
        self.deflated = bool(re.search(r"(?im)^content-encoding: deflate\r?$", self.head))
        self.inflate = zlib.decompressobj()
        self.text = b""  # what came so far, inflated
        self.ended = False

    def _recv(self) -> bytes:
        data = self.sock.recv(1 << 16)
        if not data:
            raise EOFError("the server closed the connection")
        return data

    def chunks(self) -> Iterator[bytes]:
        """The next chunk's bytes, inflated; stops after the last chunk."""
        while not self.ended:
            while (line := self.raw.find(b"\r\n")) < 0 or len(self.raw) < line + 4 + int(
                self.raw[:line], 16
            ):
                self.raw += self._recv()
            size = int(self.raw[:line], 16)
            chunk, self.raw = self.raw[line + 2 : line + 2 + size], self.raw[line + 4 + size :]
            if size == 0:
                self.ended = True
                return
            yield self.inflate.decompress(chunk) if self.deflated else chunk

    def read_until(self, needle: bytes) -> None:
        """Read chunks until `needle` is in the text (within 10 s); each chunk holds whole
        SSE blocks."""
        deadline = time.monotonic() + 10.0
        for chunk in self.chunks():
            assert chunk.endswith(b"\n\n"), chunk[-60:]
            self.text += chunk
            if needle in self.text:
                return
            if time.monotonic() > deadline:
                break
        raise AssertionError(f"no {needle!r} in the stream: {self.text[-600:]!r}")

    def events(self) -> list[bytes]:
        """The event blocks read so far, comments (heartbeats) left out."""
        return [b for b in self.text.split(b"\n\n") if b and not b.startswith(b":")]

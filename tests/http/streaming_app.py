"""A small streaming app on the real server's waiting mechanism, for tests of long-lived
answers apart from any route (`test_stream_serving`, `test_shared_parts`), and a raw
client of it."""

from __future__ import annotations

import socket
import time

from refimpl.http.encode import Answer
from refimpl.http.error_answers import to_response
from refimpl.waiting.parked import Kind, Parked, Part
from refimpl.waiting.room import WaitingRoom

HEARTBEAT = 0.2


class StreamingApp:
    """`/stream`: parts on each poke, a heartbeat at each deadline, the end at the third
    poke; `/plain`: an answer at once. Every stream stays reachable for the test."""

    def __init__(self, part_bytes: int = 10) -> None:
        self.waiting_room = WaitingRoom(to_response)
        self.streams: list[Parked[Answer]] = []
        self.part_bytes = part_bytes

    def __call__(self, environ: dict, start_response):
        if environ["PATH_INFO"] == "/plain":
            return Answer(b"plain")(environ, start_response)
        pokes = [0]
        head = Answer(b"", 200, "text/event-stream")
        head.headers = [("Content-Type", "text/event-stream")]
        size = self.part_bytes
        parked: Parked[Answer]

        def attempt(_: int) -> Answer | Part[Answer] | None:
            pokes[0] += 1
            if pokes[0] >= 3:
                return part_body(b"end\n")
            return Part(part_body(b"p" * size + b"\n"))

        def heartbeat() -> Part[Answer]:
            parked.deadline = time.monotonic() + HEARTBEAT
            return Part(part_body(b":\n"))

        parked = Parked(
            None,
            0,
            attempt,
            heartbeat,
            time.monotonic() + HEARTBEAT,
            lambda: None,
            kind=Kind.STREAM,
            at_close=lambda: part_body(b"bye\n"),
        )
        parked.decide(Part(head))  # the head goes out at once
        self.waiting_room.park(parked)
        self.streams.append(parked)
        return parked(environ, start_response)


def part_body(data: bytes) -> Answer:
    answer = Answer(data)
    answer.headers = []
    return answer


def request(address: tuple[str, int], path: str) -> socket.socket:
    conn = socket.create_connection(address, timeout=10)
    conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return conn


def read_until(conn: socket.socket, marker: bytes, seconds: float = 5.0) -> bytes:
    data = b""
    deadline = time.monotonic() + seconds
    while marker not in data and time.monotonic() < deadline:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    return data

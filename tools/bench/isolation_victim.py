"""The victim and the prober of `isolation.py`, over HTTP: 10 `/stream/changes` streams and
a long poll of `ticks` with the writer of its ticks, and `GET /health` every 20 ms.

Each function runs in a process of its own and puts one tagged tuple on its queue at the end.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import harness
import requests

VICTIM_STREAMS = 10
TICK_EVERY = 0.050
# How long after its last tick the victim waits for the events still on their way.
LAST_EVENTS_WITHIN = 30.0
PROBE_EVERY = 0.020


def _sse_blocks(response: requests.Response) -> Iterator[tuple[str, str, str, list[str]]]:
    """The stream's blocks as (id, event, data, comments), as an `EventSource` parses them."""
    text = ""
    for chunk in response.iter_content(chunk_size=None):
        text += chunk.decode()
        while "\n\n" in text:
            block, text = text.split("\n\n", 1)
            ident = event = data = ""
            comments = []
            for line in block.split("\n"):
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if not name:
                    comments.append(value)
                elif name == "id":
                    ident = value
                elif name == "event":
                    event = value
                elif name == "data":
                    data = value
            yield ident, event, data, comments


def victim(url: str, tokens: list[str], seconds: float, queue: Any) -> None:
    """10 streams and a long poll of `ticks`, and the writer of the ticks.

    Puts (latencies in s, events got, events expected, notes): a tick counts once per reader
    that got it exactly once, expected is the ticks whose INSERT answered 200 times the
    readers, and the notes say every reader's answers other than 200, its resets, its end
    comments and its ticks missing or got twice. A stream that ends is reconnected with
    `Last-Event-ID`, as an `EventSource` does, so an end the spec allows loses nothing.
    """
    headers = {"Authorization": f"Bearer {tokens[0]}"}
    sent: dict[int, float] = {}
    committed: set[int] = set()
    readers = VICTIM_STREAMS + 1
    got: list[Counter[int]] = [Counter() for _ in range(readers)]
    notes: list[str] = []
    worst = [(0.0, 0.0)] * readers  # each reader's latest event: (latency, its commit's time)
    latencies: list[float] = []
    lock = threading.Lock()
    stop = threading.Event()
    began = time.monotonic()

    def note(reader: int, text: str) -> None:
        with lock:
            notes.append(f"{time.monotonic() - began:7.2f}s reader {reader}: {text}")

    def arrived(reader: int, ident: int) -> None:
        now = time.monotonic()
        with lock:
            got[reader][ident] += 1
            at = sent.get(ident)
            if at is not None and got[reader][ident] == 1:
                latencies.append(now - at)
                if now - at > worst[reader][0]:
                    worst[reader] = (now - at, at - began)

    def stream(reader: int, token: str) -> None:
        last = ""
        while not stop.is_set():
            asked = {"Authorization": f"Bearer {token}"}
            if last:
                asked["Last-Event-ID"] = last
            try:
                response = requests.get(
                    f"{url}/stream/changes?db=demo&table=ticks",
                    headers=asked,
                    stream=True,
                    timeout=(10, 60),
                )
            except requests.RequestException as error:
                note(reader, f"connect failed: {error}")
                time.sleep(0.5)
                continue
            if response.status_code != 200:
                note(reader, f"answer {response.status_code}: {response.text[:200]}")
                response.close()
                time.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            try:
                for ident, event, data, comments in _sse_blocks(response):
                    last = ident or last
                    for comment in comments:
                        if comment != "heartbeat":
                            note(reader, f"comment {comment!r} (last id {last})")
                    if event == "change":
                        arrived(reader, json.loads(data)["row"]["id"])
                    elif event == "reset":
                        note(reader, f"reset, id {ident!r}")
                    if stop.is_set():
                        break
            except requests.RequestException as error:
                note(reader, f"read failed: {error}")
            response.close()
            if not stop.is_set():
                note(reader, f"stream ended; reconnecting after {last}")

    def long_poll(reader: int) -> None:
        http = harness.LeanHTTP(url, headers)
        status, _, body = http.request(
            "GET", "/api/changes?db=demo&table=ticks&format=json&limit=1"
        )
        position = json.loads(body)["durable_lsn"]
        while not stop.is_set():
            target = f"/api/changes?db=demo&table=ticks&format=json&from={position}&wait=5000"
            status, _, body = http.request("GET", target)
            if status != 200:
                note(reader, f"answer {status}: {body[:200]!r}")
                time.sleep(0.05)
                continue
            for piece in body.split(b'"row":{"id":')[1:]:
                arrived(reader, int(piece.split(b",", 1)[0].split(b"}", 1)[0]))
            position = json.loads(body)["next"]

    threads = [
        threading.Thread(target=stream, args=(n, tokens[n % len(tokens)]), daemon=True)
        for n in range(VICTIM_STREAMS)
    ]
    threads.append(threading.Thread(target=long_poll, args=(VICTIM_STREAMS,), daemon=True))
    for thread in threads:
        thread.start()
    time.sleep(1.0)  # every stream open
    writer = harness.LeanHTTP(url, headers)
    until = time.monotonic() + seconds
    ident = int(time.time() * 1000) % 1_000_000_000
    while time.monotonic() < until:
        ident += 1
        with lock:
            sent[ident] = time.monotonic()
        status, _, body = writer.request(
            "POST", "/exec?db=demo", f"INSERT INTO ticks VALUES ({ident}, 1)".encode()
        )
        if status == 200:
            committed.add(ident)
        else:
            note(VICTIM_STREAMS + 1, f"INSERT of tick {ident}: {status} {body[:200]!r}")
        time.sleep(TICK_EVERY)
    # Every event of a commit is awaited (an event that comes later than this is lost).
    deadline = time.monotonic() + LAST_EVENTS_WITHIN

    def complete() -> bool:
        with lock:
            return all(committed <= set(counts) for counts in got)

    while time.monotonic() < deadline and not complete():
        time.sleep(0.05)
    with lock:
        received = sum(1 for counts in got for i in committed if counts[i] == 1)
        for reader, counts in enumerate(got):
            missing = sorted(committed - set(counts))
            twice = sorted(i for i, n in counts.items() if n > 1)
            if missing:
                notes.append(f"reader {reader}: {len(missing)} ticks missing: {_spans(missing)}")
            if twice:
                notes.append(f"reader {reader}: {len(twice)} ticks got twice: {_spans(twice)}")
            if worst[reader][0] > 1.0:
                late, at = worst[reader]
                notes.append(f"reader {reader}: an event {late:.1f} s late (sent at {at:.1f} s)")
    if received < len(committed) * readers:
        # Tells a stream that was not woken for the last commits (their events come with
        # the next commit) from one that dropped them (they never come).
        writer.request(
            "POST", "/exec?db=demo", f"INSERT INTO ticks VALUES ({ident + 1}, 1)".encode()
        )
        nudged = time.monotonic() + 5.0
        while time.monotonic() < nudged and not complete():
            time.sleep(0.05)
        with lock:
            late = sum(1 for counts in got for i in committed if counts[i] == 1) - received
        notes.append(f"after one more commit, {late} of the missing events came")
    stop.set()
    queue.put(("victim", latencies, received, len(committed) * readers, notes))


def _spans(idents: list[int]) -> str:
    """Runs of consecutive ticks, `a-b`, for a note a person reads."""
    spans: list[list[int]] = []
    for ident in idents:
        if spans and ident == spans[-1][1] + 1:
            spans[-1][1] = ident
        else:
            spans.append([ident, ident])
    return ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in spans)


def prober(url: str, seconds: float, queue: Any) -> None:
    http = harness.LeanHTTP(url)
    times: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        started = time.monotonic()
        http.request("GET", "/health")
        times.append(time.monotonic() - started)
        time.sleep(PROBE_EVERY)
    queue.put(("health", times))

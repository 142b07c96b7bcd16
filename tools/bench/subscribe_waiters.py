"""`subscribe.py`'s waiters, in the processes it forks: each holds subscriptions of the candle
query and notes when each benchmark trade's `rows` reached it (its read, and with streams
its bytes' arrival at the socket), checking that each trade comes once, in order, in its
own candle (`TradeOrder`). Long polls (`_waiter`), streams read by a thread each
(`_stream_waiter`, --threaded-waiters), or a process's streams on one thread, parsed after
the run (`_lean_stream_waiters`, --stream's default). `_waiters` runs a process's share.
"""

from __future__ import annotations

import json
import selectors
import socket
import struct
import threading
import time
from typing import Any
from urllib.parse import quote

import harness
from candle_query import CANDLES
from stream_readers import Dechunked

WAIT_MS = 10_000  # a long poll's wait

# The loaded trades are priced 100 to 112; a benchmark trade's price is the writer's
# CLOCK_MONOTONIC, the seconds since the machine booted: more than this on any machine up
# for two minutes (1,000, as it was, dropped every answer in a machine's first 17 minutes).
LOADED_PRICES = 113


def parse_event(text: str) -> tuple[str, str, dict[str, Any] | None]:
    """(id, event kind, data) of one /api/subscribe answer."""
    ident, kind, data = "", "none", None
    for line in text.splitlines():
        if line.startswith("id: "):
            ident = line[4:]
        elif line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            data = json.loads(line[6:])
    return ident, kind, data


def newest_close(data: dict[str, Any]) -> float:
    names = [c["name"] for c in data["columns"]]
    close = names.index("close")
    return max(row[close] for row in data["rows"])


class TradeOrder:
    """One waiter's benchmark trades as they come: each once and in the order committed (the
    writer's clock, their price, rises), each in its own candle (its high is its close: no
    earlier price of its minute is higher); `wrong` counts those that are not."""

    def __init__(self) -> None:
        self.last = 0.0
        self.wrong = 0

    def trade(self, data: dict[str, Any] | None) -> float | None:
        """The benchmark trade a `rows` event's data carries (its newest close); None if it
        has no row or only a loaded price."""
        if not data or not data["rows"]:
            return None
        names = [c["name"] for c in data["columns"]]
        close, high = names.index("close"), names.index("high")
        row = max(data["rows"], key=lambda r: r[close])
        sent: float = row[close]
        if sent <= LOADED_PRICES:
            return None
        if sent <= self.last or row[high] != sent:
            self.wrong += 1
        self.last = max(self.last, sent)
        return sent


def _waiter(
    target: dict[str, Any], symbol: str, ident: str, stop: Any, ready: Any, out: list[Any]
) -> None:
    client = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    query = quote(CANDLES.format(symbol=symbol))
    samples: list[tuple[float, float, float | None]] = []
    errors, order = 0, TradeOrder()
    with ready.get_lock():
        ready.value += 1
    while not stop.is_set():
        try:
            status, _, body = client.request(
                "GET", f"/api/subscribe?query={query}&id={quote(ident)}&wait={WAIT_MS}"
            )
            now = time.monotonic()
            if status != 200:
                raise ValueError(f"status {status}")
            ident, kind, data = parse_event(body.decode("utf-8"))
        except (OSError, EOFError, ValueError):
            errors += 1
            client.close()
            time.sleep(0.1)
            continue
        sent = order.trade(data) if kind == "rows" else None
        if sent is not None:
            samples.append((sent, now - sent, None))  # (no arrival time: see streams')
    client.close()
    out.append((samples, errors, order.wrong))


# A stream's reads note when their bytes reached its socket (the kernel's clock at the
# sender's send, on loopback): SO_TIMESTAMPNS (Linux's number; Python names it not), its
# note a struct timespec of CLOCK_REALTIME.
SO_TIMESTAMPNS = 35
ARRIVAL_NOTE = socket.CMSG_SPACE(16)


def arrival(notes: list[tuple[int, int, bytes]], now: float) -> float:
    """When a read's last bytes reached the socket, on CLOCK_MONOTONIC: the clock now less
    the realtime clock's age of the kernel's note; without a note, `now` (the read's). A
    waiter's read comes only once its thread has the interpreter lock of its process, whose
    other 24 waiters were woken by the same commit: its clock at the read counts the
    client's own queue, the arrival does not."""
    for level, kind, data in notes:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanos = struct.unpack("qq", data[:16])
            return time.monotonic() - (time.time() - seconds - nanos / 1e9)
    return now


def _stream_waiter(
    target: dict[str, Any], symbol: str, ident: str, stop: Any, ready: Any, out: list[Any]
) -> None:
    """As `_waiter`, over one stream (`stream=true`) read to the end: no request a commit."""
    samples: list[tuple[float, float, float]] = []
    errors, order = 0, TradeOrder()
    with ready.get_lock():
        ready.value += 1
    while not stop.is_set():
        try:
            sock = _stream_request(target, symbol, ident)
        except OSError:
            errors += 1
            time.sleep(0.1)
            continue
        sock.settimeout(1.0)
        events = StreamEvents(ident, order)
        while not stop.is_set():
            try:
                data, notes, _, _ = sock.recvmsg(65536, ARRIVAL_NOTE)
            except TimeoutError:
                continue
            except OSError:
                data = b""
            if not data:
                errors += 1  # the server ended it: the waiter opens it again
                break
            now = time.monotonic()
            events.feed(data, arrival(notes, now), now, samples)
        ident = events.ident
        sock.close()
    out.append((samples, errors, order.wrong))


def _stream_request(target: dict[str, Any], symbol: str, ident: str) -> socket.socket:
    """A stream of `symbol`'s subscription from `ident`, asked for; its socket notes when
    its bytes arrive (`arrival`)."""
    host, _, port = target["url"].rpartition("/")[2].rpartition(":")
    query = quote(CANDLES.format(symbol=symbol))
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    sock.sendall(
        f"GET /api/subscribe?query={query}&id={quote(ident)}&stream=true HTTP/1.1\r\n"
        f"Host: {host}\r\nAuthorization: Bearer {target['token']}\r\n\r\n".encode()
    )
    return sock


class StreamEvents:
    """One stream connection's answers parsed as its bytes come: each trade's sample, and
    the last id (to reopen the stream from)."""

    def __init__(self, ident: str, order: TradeOrder) -> None:
        self.ident = ident  # the last id seen (the one asked for until one comes)
        self._order = order  # checks the stream's trades (kept over its reopenings)
        self._chunked = Dechunked()
        self._text = b""

    def feed(
        self, data: bytes, arrived: float, now: float, samples: list[tuple[float, float, float]]
    ) -> None:
        """Take one read's bytes (arrived, read at `now`): a (sent, read delay, arrival
        delay) sample appended for each trade its whole events bring."""
        self._text += b"".join(self._chunked.chunks(data))
        *events, self._text = self._text.split(b"\n\n")
        for event in events:
            ident, kind, body = parse_event(event.decode("utf-8"))
            self.ident = ident or self.ident
            sent = self._order.trade(body) if kind == "rows" else None
            if sent is not None:
                samples.append((sent, now - sent, arrived - sent))


def _read_later(
    reads: list[tuple[bytes, float, float]], ident: str, order: TradeOrder
) -> tuple[list[tuple[float, float, float]], str]:
    """The samples of one stream's reads, each (bytes, arrival, read time), and its last id
    (`ident` if none came); `order` checks the stream's trades (kept over its reopenings)."""
    samples: list[tuple[float, float, float]] = []
    events = StreamEvents(ident, order)
    for data, arrived, now in reads:
        events.feed(data, arrived, now, samples)
    return samples, events.ident


# Past the stop, how long lean waiters read on for the parts still coming.
STOP_READ_SECONDS = 30.0


def _lean_stream_waiters(
    target: dict[str, Any], pairs: list[tuple[str, str]], stop: Any, ready: Any, results: Any
) -> None:
    """--stream's waiters (unless --threaded-waiters): a process's streams read by one
    thread (a selector), each read only kept (its bytes, arrival and read time) and parsed
    once the run is over, as `_stream_waiter`'s would be: the waiters then take the server's
    processors for little more than their reads, and no 25 threads of a process queue for
    its interpreter lock."""
    selector = selectors.DefaultSelector()
    samples: list[tuple[float, float, float]] = []
    errors = 0

    orders = {symbol_ident: TradeOrder() for symbol_ident in pairs}  # each stream's

    def open_stream(
        symbol: str, ident: str, reads: list[tuple[bytes, float, float]], order: TradeOrder
    ) -> None:
        sock = _stream_request(target, symbol, ident)
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ, (symbol, ident, reads, order))

    def read_ready(timeout: float) -> list[socket.socket]:
        """Keep what the streams ready within `timeout` have; those that had bytes."""
        nonlocal errors, samples
        got_bytes = []
        for key, _ in selector.select(timeout):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data, notes, _, _ = sock.recvmsg(65536, ARRIVAL_NOTE)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            now = time.monotonic()
            symbol, ident, reads, order = key.data
            if data:
                reads.append((data, arrival(notes, now), now))
                got_bytes.append(sock)
                continue
            errors += 1  # the server ended it: the waiter opens it again, from its last id
            selector.unregister(sock)
            sock.close()
            got, ident = _read_later(reads, ident, order)
            samples += got
            if not stop.is_set():
                open_stream(symbol, ident, [], order)
        return got_bytes

    for (symbol, ident), order in orders.items():
        open_stream(symbol, ident, [], order)
    with ready.get_lock():
        ready.value += len(pairs)
    while not stop.is_set():
        read_ready(1.0)
    # Past the stop, each stream is read until the commit that follows it (one a symbol)
    # reached it: no part of the measured commits is left unread, however late (the
    # threaded waiters read theirs as they block for the next).
    unreached = {key.fileobj for key in selector.get_map().values()}
    until = time.monotonic() + STOP_READ_SECONDS
    while unreached and time.monotonic() < until:
        unreached.difference_update(read_ready(0.5))
    for key in list(selector.get_map().values()):
        samples += _read_later(key.data[2], key.data[1], key.data[3])[0]
        key.fileobj.close()  # type: ignore[union-attr]
    results.put((samples, errors, sum(order.wrong for order in orders.values())))


def _waiters(
    target: dict[str, Any], pairs: list[tuple[str, str]], stop: Any, ready: Any, results: Any
) -> None:
    if target.get("lean"):
        _lean_stream_waiters(target, pairs, stop, ready, results)
        return
    out: list[Any] = []
    waiter = _stream_waiter if target.get("stream") else _waiter
    threads = [
        threading.Thread(target=waiter, args=(target, s, i, stop, ready, out)) for s, i in pairs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put(
        (
            [s for samples, _, _ in out for s in samples],
            sum(e for _, e, _ in out),
            sum(w for _, _, w in out),
        )
    )

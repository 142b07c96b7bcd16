"""tools/bench/subscribe.py's stream waiters (subscribe_waiters.py) note when a part reached
their socket, not only when they read it: bytes that waited in a socket while the reader
was busy are dated by their arrival (the kernel's note), on the clock the writer stamps its
trades with."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def test_a_read_is_dated_by_its_bytes_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmarks import each other by bare name, from their own folder.
    monkeypatch.syspath_prepend(str(BENCH))
    import subscribe_waiters as waiters  # type: ignore[import-not-found]

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    try:
        client.setsockopt(socket.SOL_SOCKET, waiters.SO_TIMESTAMPNS, 1)
        _until_stamped_on_arrival(waiters, client, server)
        before = time.monotonic()
        server.sendall(b"event: rows\n\n")
        after = time.monotonic()
        time.sleep(0.2)  # the reader busy elsewhere: the bytes wait in its socket
        data, notes, _, _ = client.recvmsg(65536, waiters.ARRIVAL_NOTE)
        read = time.monotonic()
        arrived = waiters.arrival(notes, read)
        assert data == b"event: rows\n\n"
        # By the send, not the read (the clocks' conversion is good to well under 0.05 s).
        assert before - 0.05 <= arrived <= after + 0.05
        assert arrived < read - 0.1
        # Without the kernel's note, the read's own time.
        assert waiters.arrival([], read) == read
    finally:
        for each in (listener, client, server):
            each.close()


def _until_stamped_on_arrival(waiters: Any, client: socket.socket, server: socket.socket) -> None:
    """Return once the kernel stamps the bytes `client` receives as they arrive. The first
    socket that asks for stamps turns them on for the machine by a deferred kernel work, late
    on a loaded machine; bytes that arrive before it ran are stamped when read (the test
    failed so, 4 times in 15 at load 17)."""
    for _ in range(100):
        server.sendall(b".")
        time.sleep(0.02)
        read = time.monotonic()
        _, notes, _, _ = client.recvmsg(1, waiters.ARRIVAL_NOTE)
        if waiters.arrival(notes, read) < read - 0.01:
            return
    pytest.fail("the kernel never stamped a byte as it arrived")


def _chunk(event: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(event), event)


def test_lean_waiters_parse_their_reads_afterwards_as_they_came(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import subscribe_waiters as waiters

    def rows(ident: str, close: float) -> bytes:
        data = f'{{"columns":[{{"name":"high"}},{{"name":"close"}}],"rows":[[{close},{close}]]}}'
        return f"id: {ident}\nevent: rows\ndata: {data}\n\n".encode()

    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    first, second = _chunk(rows("a.1", 500.0)), _chunk(rows("a.2", 600.0))
    # The second event cut across two reads: it counts at the read that completed it.
    cut = len(second) // 2
    reads = [
        (head + _chunk(b"retry: 1000\n") + first, 500.5, 500.75),
        (second[:cut], 600.25, 600.5),
        (second[cut:], 601.0, 602.0),
    ]
    order = waiters.TradeOrder()
    samples, ident = waiters._read_later(reads, "a.0", order)
    assert ident == "a.2"
    assert samples == [(500.0, 0.75, 0.5), (600.0, 2.0, 1.0)]
    assert order.wrong == 0
    # A loaded price (not a benchmark trade) is no sample; no event keeps the id asked.
    loaded = [(head + _chunk(rows("b.1", 100.0)), 1.0, 1.0)]
    assert waiters._read_later(loaded, "b.0", waiters.TradeOrder()) == ([], "b.1")
    assert waiters._read_later([], "c.4", waiters.TradeOrder()) == ([], "c.4")
    # The stream's order holds over its reopenings: a trade seen before counts wrong again.
    again = [(head + first, 700.0, 700.0)]
    assert waiters._read_later(again, "a.0", order)[0] == [(500.0, 200.0, 200.0)]
    assert order.wrong == 1


def test_lean_waiters_read_on_past_the_stop_until_each_stream_had_its_next_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Parts of measured commits may come late on a loaded machine: they are read, not left.
    monkeypatch.syspath_prepend(str(BENCH))
    import multiprocessing
    import queue
    import threading

    import subscribe_waiters as waiters

    def rows(ident: str, close: float) -> bytes:
        data = f'{{"columns":[{{"name":"close"}},{{"name":"high"}}],"rows":[[{close},{close}]]}}'
        return _chunk(f"id: {ident}\nevent: rows\ndata: {data}\n\n".encode())

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    stop, results = threading.Event(), queue.Queue[Any]()
    ready = multiprocessing.get_context("fork").Value("i", 0)
    pairs = [("S0000", "a.0"), ("S0001", "b.0")]
    target = {"url": f"http://127.0.0.1:{port}", "token": "t", "stream": True, "lean": True}
    waiters = threading.Thread(
        target=waiters._lean_stream_waiters, args=(target, pairs, stop, ready, results)
    )
    waiters.start()
    streams = [listener.accept()[0] for _ in pairs]
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
    for n, stream in enumerate(streams):
        assert b"stream=true" in stream.recv(65536)
        stream.sendall(head + rows(f"{n}.1", 500.0))
    time.sleep(0.3)
    stop.set()
    time.sleep(1.5)  # the waiters' loop has seen the stop by now
    for n, stream in enumerate(streams):
        stream.sendall(rows(f"{n}.2", 600.0))  # a measured commit's late part
    samples, errors, wrong = results.get(timeout=20)
    waiters.join(20)
    for each in (listener, *streams):
        each.close()
    assert errors == wrong == 0
    assert sorted(sent for sent, _, _ in samples) == [500.0, 500.0, 600.0, 600.0]


def _candle(*rows: tuple[float, float]) -> dict[str, Any]:
    columns = [{"name": name} for name in ("m", "open", "high", "low", "close")]
    return {"columns": columns, "rows": [[0, 100.0, high, 100.0, close] for high, close in rows]}


def test_each_trade_counts_once_in_order_in_its_own_candle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import subscribe_waiters as waiters

    order = waiters.TradeOrder()
    # The newest close is the trade; a loaded price or no row is none.
    assert order.trade(_candle((112.0, 112.0), (500.0, 500.0))) == 500.0
    assert order.trade(_candle((112.0, 112.0))) is None
    assert order.trade(_candle()) is None
    assert order.trade(None) is None
    assert order.wrong == 0
    assert order.trade(_candle((600.0, 600.0))) == 600.0
    assert order.wrong == 0
    # Again (a duplicate), earlier (out of order), or a candle whose high is not its trade.
    assert order.trade(_candle((600.0, 600.0))) == 600.0
    assert order.trade(_candle((550.0, 550.0))) == 550.0
    assert order.trade(_candle((900.0, 700.0))) == 700.0
    assert order.wrong == 3

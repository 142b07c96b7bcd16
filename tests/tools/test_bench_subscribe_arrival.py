"""tools/bench/subscribe.py's stream waiters note when a part reached their socket, not only
when they read it: bytes that waited in a socket while the reader was busy are dated by
their arrival (the kernel's note), on the clock the writer stamps its trades with."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def test_a_read_is_dated_by_its_bytes_arrival(monkeypatch: pytest.MonkeyPatch) -> None:
    # The benchmarks import each other by bare name, from their own folder.
    monkeypatch.syspath_prepend(str(BENCH))
    import subscribe  # type: ignore[import-not-found]

    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    server, _ = listener.accept()
    try:
        client.setsockopt(socket.SOL_SOCKET, subscribe.SO_TIMESTAMPNS, 1)
        sent = time.monotonic()
        server.sendall(b"event: rows\n\n")
        time.sleep(0.2)  # the reader busy elsewhere: the bytes wait in its socket
        data, notes, _, _ = client.recvmsg(65536, subscribe.ARRIVAL_NOTE)
        read = time.monotonic()
        arrived = subscribe.arrival(notes, read)
        assert data == b"event: rows\n\n"
        # By the send, not the read (the clocks' conversion is good to well under 0.1 s).
        assert sent - 0.05 <= arrived <= sent + 0.1 < read
        # Without the kernel's note, the read's own time.
        assert subscribe.arrival([], read) == read
    finally:
        for each in (listener, client, server):
            each.close()

"""A stream the client ends with CopyDone lets its slot go before it answers: a client that
has read the ReadyForQuery may at once drop the slot, or stream from it, on another
connection (the spec's example `replication-slot-limits` does so)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from refimpl.engine.instance import Instance
from refimpl.pgwire import messages as m
from refimpl.pgwire.replication_plugins import make_plugin
from refimpl.pgwire.replication_stream import Walsender, _Bell

PID = 7


class _EndingClient:
    """A client that ends the stream at once; what the slot looked like at each answer."""

    def __init__(self, instance: Instance, slot: str) -> None:
        self._pair = socket.socketpair()
        self._instance = instance
        self._slot = slot
        self._sent_end = False
        self.holders_at_ready: list[int | None] = []

    def fileno(self) -> int:
        return self._pair[0].fileno()

    def send(self, data: bytes) -> None:
        if m.ReadyForQuery("I").encode() in data:
            self.holders_at_ready.append(self._instance.slots.get(self._slot).active_pid)

    def recv_now(self) -> bytes | None:
        if self._sent_end:
            return None
        self._sent_end = True
        return b"c" + struct.pack("!i", 4)  # CopyDone

    @property
    def stopping(self) -> bool:
        return False

    def close(self) -> None:
        for end in self._pair:
            end.close()


def test_copy_done_lets_the_slot_go_before_the_ready_for_query(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    try:
        _end_a_stream(instance)
    finally:
        instance.close()


def _end_a_stream(instance: Instance) -> None:
    database = instance.database("demo")
    slot = instance.slots.create(
        "s", "demo", "test_decoding", "admin", database.log.durable_lsn, temporary=False
    )
    instance.slots.acquire(slot.name, PID)
    client = _EndingClient(instance, slot.name)
    walsender = Walsender(
        database,
        instance.slots,
        slot.name,
        make_plugin("test_decoding", []),
        lambda table: True,
        slot.confirmed,
        PID,
    )
    try:
        ending = walsender.run(client)
    finally:
        client.close()
    assert ending.back == b""
    assert client.holders_at_ready == [None]
    instance.slots.drop(slot.name, pid=8)  # another connection's drop is not 55006


def test_a_bell_rung_after_its_walsender_let_it_go_does_nothing() -> None:
    """The server's stop rings every walsender's bell from its own thread, from a list taken
    before a walsender may have closed its bell: that late ring must not write to the
    closed file descriptor (EBADF killed the server at its stop)."""
    bell = _Bell()
    bell.ring()
    bell.close()
    bell.ring()

"""A frame's reader of runs (`run_messages.run_frame`'s `RunFrame.read`) costs little to
make, whatever its count of values and however often a connection's runs change frames (a
client that runs two prepared statements in turn makes a frame at every run): code is made
once for a count of values, not once a frame, and a Bind of many values is read by a loop,
not by code that grows with them. The reader still reads every value as `read_known` does.
"""

from __future__ import annotations

import builtins
import struct
import tracemalloc

import pytest

from refimpl.pgwire.run_messages import BindHead, read_known, run_frame

FRAMED = 1 << 30  # no Bind is longer than this here


def _head(statement: str, values: int) -> BindHead:
    head = b"\0" + statement.encode() + b"\0" + struct.pack("!hh", 0, values)
    return BindHead(head, "", statement, (), values)


def _run(head: BindHead, values: list[bytes | None]) -> bytes:
    """A run's Bind (with `values`), Execute and Sync, framed as `run_frame(head, (), False)`."""
    body = head.head
    for value in values:
        body += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    body += struct.pack("!h", 0)
    execute = b"E" + struct.pack("!i", 9) + b"\0" + struct.pack("!i", 0)
    return b"B" + struct.pack("!i", len(body) + 4) + body + execute + b"S\0\0\0\x04"


def test_frames_made_again_and_again_make_their_code_once(monkeypatch: pytest.MonkeyPatch):
    made: list[object] = []
    compile_ = builtins.compile

    def counted(*args, **kwargs):
        made.append(args[1] if len(args) > 1 else None)
        return compile_(*args, **kwargs)

    monkeypatch.setattr(builtins, "compile", counted)
    one, add = _head("one", 1), _head("add", 3)
    for n in range(100):  # two prepared statements run in turn: a frame a run
        runs: list[tuple[BindHead, list[bytes | None]]] = [
            (one, [b"%d" % n]),
            (add, [b"%d" % n, None, b"x"]),
        ]
        for head, values in runs:
            frame = run_frame(head, (), False)
            whole = _run(head, values)
            assert frame.read(bytearray(whole), 0, FRAMED) == (values, len(whole))
    assert len(made) <= 2, f"{len(made)} compiles for 200 frames of two counts of values"


def test_a_frame_of_many_values_is_made_in_bounded_memory() -> None:
    # A Bind may carry up to 65,535 values: code unrolled a line a value would take
    # hundreds of megabytes and seconds of the interpreter lock to compile, per frame.
    count = 20_000
    head = _head("many", count)
    tracemalloc.start()
    try:
        frame = run_frame(head, (), False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak / 1e6:.0f} MB to make the frame"
    values: list[bytes | None] = [b"%d" % n if n % 7 else None for n in range(count)]
    whole = _run(head, values)
    assert frame.read(bytearray(whole), 0, FRAMED) == (values, len(whole))
    assert read_known(bytearray(whole), 0, FRAMED, frame) == (values, len(whole))
    assert frame.read(bytearray(whole[:-1]), 0, FRAMED) is None  # the Sync not whole
    assert frame.read(bytearray(whole), 0, 100) is None  # a Bind longer than the limit

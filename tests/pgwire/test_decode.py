"""The messages a prepared statement's run sends (Bind, Describe, Execute, Close, Sync,
Flush) are read by a short path: it must read every body exactly as the general decoder
does, and refuse every malformed body with the same MalformedMessage sentence."""

from __future__ import annotations

import struct

import pytest

from refimpl.errors import MalformedMessage
from refimpl.pgwire import messages as m
from refimpl.pgwire import run_messages


def _general(kind: bytes, body: bytes) -> object:
    """The general decoder's answer: the message, or the sentence of its error."""
    try:
        return m.decode(kind, body)
    except MalformedMessage as error:
        return str(error)


def _decoded(kind: bytes, body: bytes) -> object:
    try:
        return run_messages.decode(kind, body)
    except MalformedMessage as error:
        return str(error)


def _bind(params: list[bytes | None], formats: tuple[int, ...], results: tuple[int, ...]) -> bytes:
    out = b"portal\0stmt\0" + struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    out += struct.pack("!h", len(params))
    for value in params:
        out += struct.pack("!i", -1) if value is None else struct.pack("!i", len(value)) + value
    return out + struct.pack(f"!h{len(results)}h", len(results), *results)


BODIES = [
    (b"B", _bind([b"42", None, "é".encode()], (0,), (0, 1, 1))),
    (b"B", _bind([], (), ())),
    (b"B", _bind([b"x" * 300], (1, 0), (1,))),
    (b"B", b"\0\0" + struct.pack("!hhh", -1, 0, 0)),  # a negative count
    (b"B", b"\0\0" + struct.pack("!hhih", 0, 1, -5, 0)),  # a NULL by any negative length
    (b"B", b"\0\0" + struct.pack("!hhi", 0, 1, 10) + b"abc" + struct.pack("!h", 0)),
    (b"B", b"\xff\0\0" + struct.pack("!hhh", 0, 0, 0)),  # not UTF-8
    (b"D", b"Sname\0"),
    (b"D", b"P\0"),
    (b"D", b"Xname\0"),
    (b"D", b"S\xffname\0"),
    (b"C", b"Pportal\0"),
    (b"E", b"\0" + struct.pack("!i", 0)),
    (b"E", b"portal\0" + struct.pack("!i", 20)),
    (b"S", b""),
    (b"H", b""),
]


@pytest.mark.parametrize(("kind", "body"), BODIES)
def test_every_cut_and_every_extra_byte_reads_as_the_general_decoder(
    kind: bytes, body: bytes
) -> None:
    for cut in range(len(body) + 1):
        assert _decoded(kind, body[:cut]) == _general(kind, body[:cut]), body[:cut]
    for extra in (b"\0", b"\0\0\0\0\0", b"zz"):
        assert _decoded(kind, body + extra) == _general(kind, body + extra)


def test_a_well_formed_bind_reads_its_values() -> None:
    message = run_messages.decode(b"B", _bind([b"42", None], (1,), (0, 1)))
    assert message == m.Bind("portal", "stmt", (1,), (b"42", None), (0, 1))
    assert run_messages.decode(b"E", b"p\0" + struct.pack("!i", 7)) == m.Execute("p", 7)
    assert isinstance(run_messages.decode(b"S", b""), m.Sync)
    with pytest.raises(MalformedMessage, match="1 byte"):
        run_messages.decode(b"S", b"x")

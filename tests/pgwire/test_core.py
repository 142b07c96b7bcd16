"""The protocol core without sockets: framing, states, errors per failure kind."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import MalformedMessage, MessageTooLarge, UnexpectedMessage, UnsupportedProtocol
from refimpl.pgwire import messages as m
from refimpl.pgwire.core import ProtocolCore
from refimpl.pgwire.sqltext import split
from refimpl.pgwire.states import State


def startup(**params: str) -> bytes:
    body = struct.pack("!i", m.PROTOCOL_3_0)
    body += b"".join(k.encode() + b"\0" + v.encode() + b"\0" for k, v in params.items()) + b"\0"
    return struct.pack("!i", len(body) + 4) + body


def typed(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def parse(name: str, text: str) -> bytes:
    return typed(b"P", name.encode() + b"\0" + text.encode() + b"\0" + struct.pack("!h", 0))


SYNC = typed(b"S", b"")


def ready_core() -> ProtocolCore:
    core = ProtocolCore(1 << 20)
    core.receive_data(startup(user="u", database="d"))
    assert core.next_message() == m.Startup({"user": "u", "database": "d"})
    for answer in (m.AuthenticationOk(), m.ReadyForQuery("I")):
        core.send(answer)
    assert core.state is State.READY
    return core


def messages_of(core: ProtocolCore) -> list[m.ClientMessage]:
    out = []
    while (message := core.next_message()) is not None:
        out.append(message)
    return out


STREAM = (
    parse("", "SELECT $1")
    + typed(b"B", b"\0\0" + struct.pack("!hhih", 0, 1, 1, 0)[:-2] + b"7" + struct.pack("!h", 0))
    + typed(b"E", b"\0" + struct.pack("!i", 0))
    + SYNC
    + typed(b"Q", b"SELECT 1\0")
)


@settings(deadline=None)  # a busy machine must not fail it
@given(st.lists(st.integers(min_value=1, max_value=len(STREAM) - 1), max_size=8, unique=True))
def test_messages_are_the_same_however_the_bytes_arrive(cuts):
    whole = ready_core()
    whole.receive_data(STREAM)
    expected = messages_of(whole)
    core = ready_core()
    got = []
    at = 0
    for cut in [*sorted(cuts), len(STREAM)]:
        core.receive_data(STREAM[at:cut])
        at = cut
        got += messages_of(core)
    assert got == expected
    assert [type(x) for x in got] == [m.Parse, m.Bind, m.Execute, m.Sync, m.Query]


def test_an_ssl_request_is_refused_with_n_and_the_startup_goes_on():
    core = ProtocolCore(1 << 20)
    core.receive_data(struct.pack("!ii", 8, m.SSL_REQUEST))
    assert core.next_message() == m.SslRequest()
    assert core.send(m.SslRefused()) == b"N"
    core.receive_data(startup(user="u"))
    assert isinstance(core.next_message(), m.Startup)


def test_after_an_extended_error_messages_are_skipped_until_sync():
    core = ready_core()
    core.receive_data(parse("", "bad") + parse("", "SELECT 2") + SYNC + parse("", "SELECT 3"))
    assert isinstance(core.next_message(), m.Parse)
    core.send(m.ErrorResponse("42601", "bad"))
    assert core.state is State.SKIPPING
    assert core.next_message() == m.Sync()  # the second Parse was dropped
    core.send(m.ReadyForQuery("I"))
    assert core.next_message() == m.Parse("", "SELECT 3", ())


def test_each_failure_kind_has_its_error_and_closes():
    core = ready_core()
    core.receive_data(typed(b"?", b""))  # no message has this type byte
    with pytest.raises(MalformedMessage):
        core.next_message()
    core = ready_core()
    core.receive_data(typed(b"p", b"secret\0"))  # a password while no one asked for it
    with pytest.raises(UnexpectedMessage):
        core.next_message()
    assert core.state is State.CLOSED
    core = ProtocolCore(100)
    core.receive_data(startup(user="u"))
    core.next_message()
    core.send(m.AuthenticationOk())
    core.send(m.ReadyForQuery("I"))
    core.receive_data(b"Q" + struct.pack("!i", 1000))
    with pytest.raises(MessageTooLarge):
        core.next_message()
    core = ProtocolCore(100)
    core.receive_data(struct.pack("!ii", 8, 2 << 16))
    with pytest.raises(UnsupportedProtocol):
        core.next_message()


def test_split_keeps_quotes_comments_and_positions():
    text = "SELECT ';' , $2, $1 -- ; no\n; /* ; */ SELECT \"a;b\", $10"
    pieces = split(text)
    assert [p.text for p in pieces] == ["SELECT ';' , ? , ?  -- ; no", '/* ; */ SELECT "a;b", ?']
    assert [p.params for p in pieces] == [(2, 1), (10,)]
    assert text[pieces[1].offset :].startswith("/* ; */")
    assert split(" ; -- only a comment\n;") == []
    body = "CREATE PROCEDURE p() LANGUAGE SQL AS $$ DELETE FROM a; DELETE FROM b $$"
    assert [p.text for p in split(body + "; SELECT $1, $x$;$x$")] == [body, "SELECT ? , $x$;$x$"]
    atomic = (
        "CREATE PROCEDURE p() BEGIN ATOMIC UPDATE a SET x = CASE WHEN x THEN 1 END;"
        " DELETE FROM b; END"
    )
    assert [p.text for p in split(atomic + "; SELECT 1; begin; end")] == [
        atomic,
        "SELECT 1",
        "begin",
        "end",
    ]
    trigger = "CREATE TRIGGER g AFTER INSERT ON t BEGIN INSERT INTO a VALUES (1); END"
    assert [p.text for p in split(trigger + ";BEGIN;COMMIT")] == [trigger, "BEGIN", "COMMIT"]


def test_a_copy_moves_the_state_and_what_follows_a_failed_one_is_dropped():
    core = ready_core()
    core.receive_data(
        typed(b"Q", b"COPY t FROM STDIN\0")
        + typed(b"d", b"1\n")
        + typed(b"H", b"")
        + typed(b"c", b"")
    )
    assert isinstance(core.next_message(), m.Query)
    core.send(m.CopyInResponse(1))
    assert core.state is State.COPY_IN
    assert core.next_message() == m.CopyData(b"1\n")
    assert core.next_message() == m.CopyDone()  # the Flush inside the copy was dropped
    assert core.state is State.READY
    core.send(m.CommandComplete("COPY 1"))
    # A COPY that fails: the client's data that was still on its way is dropped.
    core.receive_data(
        typed(b"Q", b"COPY t FROM STDIN\0")
        + typed(b"d", b"x\n")
        + typed(b"d", b"more\n")
        + typed(b"c", b"")
        + typed(b"Q", b"SELECT 1\0")
    )
    assert isinstance(core.next_message(), m.Query)
    core.send(m.CopyInResponse(1))
    assert core.next_message() == m.CopyData(b"x\n")
    core.send(m.ErrorResponse("22000", "bad line"))
    assert core.state is State.READY
    assert core.next_message() == m.Query("SELECT 1")
    # Anything but copy messages inside a COPY breaks the protocol.
    core.send(m.CopyInResponse(1))
    core.receive_data(parse("", "SELECT 2"))
    with pytest.raises(UnexpectedMessage):
        core.next_message()


def test_the_core_counts_what_it_sends_for_the_servers_measures() -> None:
    core = ready_core()
    core.receive_data(typed(b"Q", b"SELECT 1; SELEC 2\0"))
    assert isinstance(core.next_message(), m.Query)
    for answer in (
        m.CommandComplete("SELECT 1"),
        m.ErrorResponse("00000", "a notice", "NOTICE", notice=True),
        m.ErrorResponse("42601", "syntax error"),
        m.ReadyForQuery("I"),
    ):
        core.send(answer)
    core.failed("08P01")  # an error made as bytes elsewhere, told to the core
    assert core.take_counts() == (1, ["42601", "08P01"])
    assert core.take_counts() == (0, [])
    core.receive_data(typed(b"Q", b"SELECT 1\0"))
    assert isinstance(core.next_message(), m.Query)
    core.send(m.CommandComplete("SELECT 1"))
    assert (core.untaken(), core.errors) == (1, [])  # what a scrape reads, taken later
    assert core.take_counts() == (1, []) and core.untaken() == 0

"""A prepared statement's run whose Bind, Describe, Execute and Sync arrive together is
answered at once (`Conversation.answer_run`): byte for byte what the same messages answer
when they arrive one at a time, errors and transaction states included."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from refimpl.pgwire.run_messages import read_known, read_run, run_frame
from tests.pgwire.attack import logged_in, query_message
from tests.pgwire.conftest import PgServer


def frame(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def parse(name: str, text: str) -> bytes:
    return frame(b"P", name.encode() + b"\0" + text.encode() + b"\0" + struct.pack("!h", 0))


def bind(statement: str, *params: str, portal: str = "", results: tuple[int, ...] = ()) -> bytes:
    body = portal.encode() + b"\0" + statement.encode() + b"\0" + struct.pack("!h", 0)
    body += struct.pack("!h", len(params))
    body += b"".join(struct.pack("!i", len(p.encode())) + p.encode() for p in params)
    return frame(b"B", body + struct.pack(f"!h{len(results)}h", len(results), *results))


def run(
    statement: str,
    *params: str,
    max_rows: int = 0,
    describe: bool = True,
    results: tuple[int, ...] = (),
) -> list[bytes]:
    """The messages of one run of the unnamed portal, as psycopg sends them."""
    described = [frame(b"D", b"P\0")] if describe else []
    execute = frame(b"E", b"\0" + struct.pack("!i", max_rows))
    return [bind(statement, *params, results=results), *described, execute, frame(b"S", b"")]


def answers(sock: socket.socket, ready: int) -> list[tuple[bytes, bytes]]:
    """The messages the server sends up to its `ready`-th ReadyForQuery; each error's
    SQLSTATE stands for its body."""
    out: list[tuple[bytes, bytes]] = []
    buffer = b""
    while sum(kind == b"Z" for kind, _ in out) < ready:
        while len(buffer) < 5 or len(buffer) < 1 + struct.unpack_from("!i", buffer, 1)[0]:
            chunk = sock.recv(1 << 16)
            assert chunk, "the server closed the connection"
            buffer += chunk
        end = 1 + struct.unpack_from("!i", buffer, 1)[0]
        kind, body = buffer[:1], buffer[5:end]
        if kind == b"E":
            body = next(f[1:] for f in body.split(b"\0") if f[:1] == b"C")
        out.append((kind, body))
        buffer = buffer[end:]
    return out


@pytest.fixture
def conns(pg: PgServer, db: str) -> tuple[socket.socket, socket.socket]:
    pg.http.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)", db=db)
    pg.http.sql("INSERT INTO t VALUES (1, 0.5, 'a'), (2, 1.5, 'b'), (3, 2.5, 'c')", db=db)
    pair = []
    for _ in range(2):
        sock = logged_in(pg, "admin", pg.token, db)
        sock.sendall(
            parse("one", "SELECT * FROM t WHERE id = $1")
            + parse("some", "SELECT id, s FROM t WHERE v > $1")
            + parse("add", "INSERT INTO t VALUES ($1, $2, $3)")
            + frame(b"S", b"")
        )
        assert [kind for kind, _ in answers(sock, 1)] == [b"1"] * 3 + [b"Z"]
        pair.append(sock)
    return pair[0], pair[1]


def together(sock: socket.socket, messages: list[bytes]) -> list[tuple[bytes, bytes]]:
    sock.sendall(b"".join(messages))
    return answers(sock, sum(message[:1] == b"S" for message in messages))


def one_at_a_time(sock: socket.socket, messages: list[bytes]) -> list[tuple[bytes, bytes]]:
    for message in messages:  # each read and answered before the next arrives
        sock.sendall(message)
        time.sleep(0.02)
    return answers(sock, sum(message[:1] == b"S" for message in messages))


def test_runs_answer_as_their_messages_one_at_a_time(conns) -> None:
    batched, single = conns
    script = [
        *run("one", "2"),
        *run("one", "9"),  # no row
        *run("some", "0", max_rows=2),  # PortalSuspended
        *run("some", "1.0", describe=False),
        *run("one", "1", "2"),  # a wrong count of parameters: the error, then ReadyForQuery
        *run("one", "x"),  # not a BIGINT: an error of the Bind
        *run("add", "1", "0.5", "x"),  # an error while it runs: the key is taken
        *run("nowhere", "1"),  # an unknown statement
        *run("one", "3"),
    ]
    expected = one_at_a_time(single, script)
    got = together(batched, script)
    assert got == expected
    kinds = [kind for kind, _ in got]
    assert kinds[:5] == [b"2", b"T", b"D", b"C", b"Z"]
    assert (b"C", b"SELECT 0\0") in got and (b"s", b"") in got
    assert [body for kind, body in got if kind == b"E"] == [b"08P01", b"22000", b"23505", b"26000"]
    assert got[-2:] == [(b"C", b"SELECT 1\0"), (b"Z", b"I")]


def test_a_failed_run_fails_the_transaction_as_one_at_a_time(conns) -> None:
    script = [*run("add", "7", "0.5", "x"), *run("add", "7", "0.5", "y"), *run("one", "7")]
    seen = []
    # One after the other: BEGIN holds the database's write lock until the ROLLBACK.
    for sock, send in zip(conns, (together, one_at_a_time), strict=True):
        sock.sendall(query_message("BEGIN"))
        assert answers(sock, 1)[-1] == (b"Z", b"T")
        seen.append(send(sock, script))
        sock.sendall(query_message("ROLLBACK"))
        assert answers(sock, 1)[-1] == (b"Z", b"I")
    got, expected = seen
    assert got == expected
    assert [body for kind, body in got if kind in (b"E", b"Z")] == [
        b"T",
        b"23505",
        b"E",
        b"25P02",
        b"E",
    ]
    script = [*run("add", "8", "0.5", "x"), *run("one", "8")]
    got = together(conns[0], script)
    assert [kind for kind, _ in got] == [b"2", b"n", b"C", b"Z", b"2", b"T", b"D", b"C", b"Z"]
    assert (b"C", b"INSERT 0 1\0") in got


def test_a_run_is_read_together_only_when_whole_and_of_the_unnamed_portal() -> None:
    whole = b"".join(run("one", "2"))
    found = read_run(bytearray(b"xx" + whole), 2, 1 << 20)
    assert found is not None
    bound, described, max_rows, end, head = found
    assert (bound.statement, bound.params, described, max_rows, end) == (
        "one",
        (b"2",),
        True,
        0,
        2 + len(whole),
    )
    # The next run's Bind read with the head of this one (its values alone read), or, of
    # another statement, read whole: the same Binds either way.
    for script in (run("one", "37"), run("some", "1.5"), run("add", "1", "0.5", "x")):
        alone = read_run(bytearray(b"".join(script)), 0, 1 << 20)
        with_head = read_run(bytearray(b"".join(script)), 0, 1 << 20, head)
        assert alone is not None and with_head is not None
        assert with_head[:4] == alone[:4] and with_head[4] == alone[4]
        assert (with_head[4] is head) == (alone[0].statement == "one")  # reused, or read anew
    assert read_run(bytearray(b"".join(run("one", "2", describe=False))), 0, 1 << 20)
    assert read_run(bytearray(whole[:-1]), 0, 1 << 20) is None  # the Sync not whole yet
    assert read_run(bytearray(whole), 0, 10) is None  # a Bind longer than the limit
    named = bind("one", "2", portal="p") + frame(b"E", b"p\0" + struct.pack("!i", 0))
    assert read_run(bytearray(named + frame(b"S", b"")), 0, 1 << 20) is None
    assert read_run(bytearray(query_message("SELECT 1")), 0, 1 << 20) is None


def test_runs_again_answer_as_their_messages_one_at_a_time(pg, db, conns) -> None:
    """A run framed as the last one (`Conversation.quick`) answers as the general path does,
    whatever came between: errors of the Bind or of the run, other frames, a Close and a
    new Parse of the same name, an Execute of the unnamed portal the last run left."""
    script = [
        *run("one", "1"),
        *run("one", "2"),
        *run("one", "9"),  # no row
        *run("one", "x"),  # not a BIGINT: an error of the Bind
        *run("one", "3"),
        *run("one", "3", results=(1,)),  # another frame: binary rows
        *run("one", "2", results=(1,)),
        *run("one", "1", "2"),  # a wrong count of parameters
        *run("one", "2", describe=False),
        *run("one", "1", describe=False),
        frame(b"E", b"\0" + struct.pack("!i", 0)),  # the last run's portal, read through
        frame(b"S", b""),
        *run("add", "10", "0.5", "x"),
        *run("add", "11", "1.5", "y"),
        *run("add", "10", "0.5", "x"),  # an error while it runs: the key is taken
        *run("add", "12", "2.5", "z"),
        *run("one", "10"),
        *run("one", "12"),
        frame(b"C", b"Sone\0"),
        parse("one", "SELECT s, id FROM t WHERE id = $1"),  # the same Binds, other columns
        frame(b"S", b""),
        *run("one", "10"),
        *run("one", "11"),
    ]
    batched, single = conns
    expected = one_at_a_time(single, script)
    pg.http.sql("DELETE FROM t WHERE id >= 10", db=db)
    got = together(batched, script)
    assert got == expected
    assert [body for kind, body in got if kind == b"E"] == [b"22000", b"08P01", b"23505"]
    assert got.count((b"C", b"SELECT 1\0")) == 11 and got.count((b"C", b"SELECT 0\0")) == 2
    assert got.count((b"C", b"INSERT 0 1\0")) == 3
    new_row = struct.pack("!hi", 2, 1) + b"y" + struct.pack("!i", 2) + b"11"
    assert got[-3:] == [(b"D", new_row), (b"C", b"SELECT 1\0"), (b"Z", b"I")]


def test_runs_again_after_a_schema_change_answer_as_one_at_a_time(pg, db, conns) -> None:
    twice = [*run("one", "1"), *run("one", "1")]
    assert together(conns[0], twice) == one_at_a_time(conns[1], twice)
    # A new table of the same columns: the runs read it, as they read the one before.
    pg.http.sql("DROP TABLE t", db=db)
    pg.http.sql("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE, s STRING)", db=db)
    pg.http.sql("INSERT INTO t VALUES (1, 7.5, 'n')", db=db)
    got = together(conns[0], twice)
    assert got == one_at_a_time(conns[1], twice)
    row = struct.pack("!hi", 3, 1) + b"1" + struct.pack("!i", 3) + b"7.5"
    assert got.count((b"D", row + struct.pack("!i", 1) + b"n")) == 2
    # Other columns: the statement's result type changed, and each run is refused.
    pg.http.sql("ALTER TABLE t ADD COLUMN w INT", db=db)
    got = together(conns[0], twice)
    assert got == one_at_a_time(conns[1], twice)
    assert [body for kind, body in got if kind == b"E"] == [b"0A000", b"0A000"]


def test_a_run_framed_as_the_last_one_is_read_by_its_values_alone() -> None:
    first = read_run(bytearray(b"".join(run("one", "2"))), 0, 1 << 20)
    assert first is not None
    frame = run_frame(first[4], first[0].result_formats, first[1])
    for values in (("37",), ("",), ("x" * 300,)):
        whole = b"".join(run("one", *values))
        assert read_known(bytearray(b"xx" + whole), 2, 1 << 20, frame) == (
            [v.encode() for v in values],
            2 + len(whole),
        )
    null = bytearray(b"".join(run("one", "2")).replace(b"\0\0\0\x012", b"\xff\xff\xff\xff"))
    assert read_known(null, 0, 1 << 20, frame) is None  # its Bind's length no longer fits
    others = [
        run("some", "2"),  # another statement
        run("one", "2", describe=False),
        run("one", "2", results=(1,)),
        run("one", "2", max_rows=1),
        run("one", "2", "3"),  # the Bind ends elsewhere
        [bind("one", "2", portal="p"), *run("one", "2")[1:]],
    ]
    for script in others:
        assert read_known(bytearray(b"".join(script)), 0, 1 << 20, frame) is None
    whole = b"".join(run("one", "2"))
    assert read_known(bytearray(whole[:-1]), 0, 1 << 20, frame) is None  # the Sync not whole
    assert read_known(bytearray(whole), 0, 10, frame) is None  # a Bind longer than the limit
    past = whole.replace(b"\0\0\0\x012", b"\0\0\0\xff2")  # a value past the Bind's end
    assert read_known(bytearray(past), 0, 1 << 20, frame) is None
    first = read_run(bytearray(b"".join(run("add", "1", "0.5", "x"))), 0, 1 << 20)
    assert first is not None
    frame = run_frame(first[4], first[0].result_formats, first[1])
    past = b"".join(run("add", "1", "0.5", "x")).replace(b"\0\0\0\x011", b"\0\0\0\xff1")
    with pytest.raises(struct.error):  # the next value's length past the buffer's end
        read_known(bytearray(past), 0, 1 << 20, frame)

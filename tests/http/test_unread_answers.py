"""Clients that leave a large answer untaken, against a real server on loopback: no thread
that others need (an admitted worker, the owner pool's thread of a user's woken long polls)
waits on such a client's socket. What the socket does not take waits with the connection,
which is watched for writing, and is sent as the client takes it.

The regressions, both at 2d5b81d: two long polls whose large answers their clients took a
little at a time each held a worker and its admission place while the rest went out, and
with both places held nobody else's request was answered; and a re-poll that a round's
thread answered at once (its id asked for a snapshot) held that thread until its client
read, so its user's other long polls were answered only then.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from tests.http.conftest import Server
from tests.http.keepalive import user_database

# A commit's rows or a snapshot of about 20 MB: far more than the kernel buffers (the
# server's send buffer grows to 4 MB) of a client whose receive buffer is 4 KB.
SEED_ROWS, ROW_BYTES, COPIES = 40, 20_000, 25
ANSWERED_WITHIN = 5.0  # seconds: a request of another client (milliseconds when served)
QUERY = "SUBSCRIBE SELECT * FROM big"


def _fill_seed(server: Server, db: str) -> None:
    for first in range(0, SEED_ROWS, 10):
        values = ", ".join(f"({n}, '{'x' * ROW_BYTES}')" for n in range(first, first + 10))
        server.sql(f"INSERT INTO seed VALUES {values}", db)


BIG_INSERT = (
    "INSERT INTO big SELECT a.id * 100 + b.id, a.s FROM seed a, seed b"
    f" WHERE b.id < {COPIES}"  # SEED_ROWS * COPIES rows in one commit
)


class Poller:
    """One keep-alive connection of a user asking `/api/subscribe`; `small_buffer`: its
    receive buffer is 4 KB, so that the server's sends to it block as soon as it stops
    reading."""

    def __init__(self, server: Server, db: str, token: str, small_buffer: bool = False) -> None:
        host, port = server.url.removeprefix("http://").split(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if small_buffer:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(30)
        self.sock.connect((host, int(port)))
        self.host, self.db, self.token = f"{host}:{port}", db, token
        # A bytearray: taken in pieces of a few KB, a 20 MB answer joined into bytes cost
        # 12-24 s of copying (each piece copies all before it), and under load this client
        # took the last megabytes the server had handed to the kernel more slowly than a
        # client may (KEEP_ALIVE_SECONDS after the server's last send the connection counts
        # as idle): it was closed before the next request came.
        self.buffer = bytearray()

    def request(self, query: str, asked: str | None = None) -> bytes:
        """The bytes of one long poll of `query` (with id `asked`)."""
        target = f"/api/subscribe?db={self.db}&query={quote(query)}&wait=30000"
        if asked is not None:
            target += f"&id={asked}"
        return (
            f"GET {target} HTTP/1.1\r\nHost: {self.host}\r\n"
            f"Authorization: Bearer {self.token}\r\n\r\n"
        ).encode()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def answer(self) -> tuple[int, bytes]:
        """The status and body of the next whole answer."""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self._recv()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        size = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(self.buffer) < size:
            self.buffer += self._recv()
        body = bytes(self.buffer[:size])
        del self.buffer[:size]
        return int(head.split()[1]), body

    def answer_id(self) -> str:
        """The id of the next answer (a 200), to ask again with."""
        status, body = self.answer()
        assert status == 200, body[:300]
        return body.split(b"\nid: ")[1].split(b"\n")[0].decode()

    def _recv(self) -> bytes:
        more = self.sock.recv(65536)
        assert more, "the server closed the connection"
        return more

    def close(self) -> None:
        self.sock.close()


class Trickle:
    """Reads a connection: its first FAST_BYTES at once (the server's send buffer then has
    room, and what waited to be sent goes on), then 8 KB at a time, slowly (under 800 KB/s),
    until stopped: a client that takes its answer, but at its own pace."""

    FAST_BYTES = 2 * 1024 * 1024

    def __init__(self, sock: socket.socket) -> None:
        self._stop = threading.Event()
        self.slow = threading.Event()  # its first FAST_BYTES are read
        self._sock = sock
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        got = 0
        try:
            while got < self.FAST_BYTES:
                more = self._sock.recv(65536)
                if not more:
                    return
                got += len(more)
            self.slow.set()
            while not self._stop.wait(0.01):
                if not self._sock.recv(8192):
                    return
        except OSError:
            return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def setup(server: Server) -> Iterator[tuple[str, str, str]]:
    """A database with the seed rows, an empty table `big` and the table `t`, a user H (the
    hostile client) and a user G (the other), both with READ; yields (db, H's token, G's
    token)."""
    db, _, hostile = user_database(
        server,
        "unread_",
        ["READ"],
        [
            "CREATE TABLE seed (id INT PRIMARY KEY, s STRING)",
            "CREATE TABLE big (id INT PRIMARY KEY, s STRING)",
        ],
    )
    _fill_seed(server, db)
    other = "g_" + db[-10:]
    server.sql(f"CREATE USER {other}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO {other}", db)
    yield db, hostile, server.new_token(other, db)


def _others_are_answered(server: Server, db: str, token: str) -> None:
    """Another user's `/exec` and long poll are answered in their normal time."""
    started = time.monotonic()
    answer = server.post(
        "/exec",
        params={"db": db},
        data=b"SELECT count(*) FROM t",
        token=token,
        timeout=ANSWERED_WITHIN,
    )
    assert answer.status_code == 200, answer.text
    assert time.monotonic() - started < ANSWERED_WITHIN
    _poll_is_answered(server, Poller(server, db, token))


def _poll_is_answered(server: Server, poller: Poller) -> None:
    """`poller` waits on `t`; a commit to `t` is answered within ANSWERED_WITHIN."""
    try:
        poller.send(poller.request("SUBSCRIBE SELECT * FROM t"))
        asked = poller.answer_id()
        poller.send(poller.request("SUBSCRIBE SELECT * FROM t", asked))
        time.sleep(0.2)  # parked
        key = int(time.monotonic() * 1e6) % 1_000_000_000
        server.sql(f"INSERT INTO t VALUES ({key}, 1)", poller.db)
        started = time.monotonic()
        poller.sock.settimeout(ANSWERED_WITHIN)
        status, body = poller.answer()
        assert status == 200 and str(key).encode() in body, body[:300]
        assert time.monotonic() - started < ANSWERED_WITHIN
    finally:
        poller.close()


def test_slowly_read_answers_of_woken_polls_hold_no_admitted_worker(
    server: Server, setup: tuple[str, str, str]
) -> None:
    db, hostile, other = setup
    # Two: as many as the server's admission places (and as many long polls as this server's
    # wait places let one user park).
    pollers = [Poller(server, db, hostile) for _ in range(2)]
    trickles: list[Trickle] = []
    try:
        for poller in pollers:
            poller.send(poller.request(QUERY))
            poller.send(poller.request(QUERY, poller.answer_id()))  # parked: big is empty
        time.sleep(0.3)
        server.sql(BIG_INSERT, db)  # each answer: the commit's 20 MB of rows
        trickles = [Trickle(poller.sock) for poller in pollers]
        for trickle in trickles:
            # Each is sent its answer's rest as it reads, whatever the others do.
            assert trickle.slow.wait(20), "a client reading its answer was sent no more of it"
        time.sleep(0.5)  # the answers' rests are being sent as the clients take them
        _others_are_answered(server, db, other)
    finally:
        for trickle in trickles:
            trickle.stop()
        for poller in pollers:
            poller.close()


def test_an_unread_answer_to_a_repeat_holds_no_round_thread(
    server: Server, setup: tuple[str, str, str]
) -> None:
    db, hostile, other = setup
    server.sql(BIG_INSERT, db)  # a snapshot of `big` is 20 MB
    stuck = Poller(server, db, hostile, small_buffer=True)
    try:
        stuck.send(stuck.request(QUERY))
        asked = stuck.answer_id()  # the snapshot, read whole
        stuck.send(stuck.request(QUERY, asked))
        time.sleep(0.3)  # parked; what comes next waits in the kernel until it is answered
        # Its repeat (the same head but the digits of its id), asking a version that is
        # not kept: a snapshot, answered at once, which this client never reads.
        name, _, version = asked.rpartition(".")
        stuck.send(stuck.request(QUERY, f"{name}.{int(version) + 1000}"))
        server.sql("INSERT INTO big VALUES (999999, 'y')", db)  # wakes the parked poll
        time.sleep(1.0)  # its answer goes out, then the repeat's snapshot
        # The same user's other, well-behaved connection, and another user's.
        _poll_is_answered(server, Poller(server, db, hostile))
        _others_are_answered(server, db, other)
    finally:
        stuck.close()

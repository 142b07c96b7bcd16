"""The floor of a fan-out round's cost: CPU per stream of one send() of a part's bytes to 1,000
loopback sockets, against the same loop without the send.

A round of `tools/bench/stream.py` (its `--server-timing`: "round CPU us per stream") sends
one part, made once, to every stream: one lock and one send() a socket. This measures what
that costs with nothing of refimpl in the way: a thread sends `--size` bytes to each of
`--streams` connected sockets, read by another process (as the bench's readers read), under
a lock as the server's send is; and the same loop with `fileno()` in place of the send,
which is what the Python part of a round costs at most. The difference is the kernel's: on
loopback the sender's system call also carries the segment into the reader's socket and
wakes its process, so it does not shrink with fewer bytes. Medians of `--rounds` rounds,
the thread's CPU time (`time.thread_time`).

With `--sendfile`, also the same part written once into a memory file (`os.memfd_create`) and
sent to each socket from there by `os.sendfile`: the kernel then hands each socket references
to the file's pages instead of copying the bytes into it (the copy, `_copy_from_iter` in
`perf`, is what a round that carries many commits, a part of 100 KB and more, spends most of
its system time on). The two sends take turns, round by round (which goes first alternates),
each round after every socket's queue is empty (its reader took everything: `TIOCOUTQ`),
with this process on the first CPU and the reader on the others, as the stream bench pins
the server and its readers; a row also says which share of the bytes the sockets took (1.00:
all, so that both sends did the same work). The server sent its large shared parts by
sendfile() for a while and no longer does: here it cost more CPU a stream than send() at
every size from 32 to 256 KB (1.05-1.11x up to 64 KB, 1.36-1.58x from 128 KB, load 13-20),
the kernel taking a reference and a pipe buffer for each page of the file for every socket.

    python tools/bench/stream_sends.py                       # 200 B (an event) and 36 KB
    python tools/bench/stream_sends.py --size 200 --streams 1000
    python tools/bench/stream_sends.py --size 200 --size 36000 --size 250000 --sendfile
    python tools/bench/stream_sends.py --sendfile --size 32768 --size 49152 --size 65536 \
        --size 131072 --size 196608 --size 262144        # a fan-out round's part sizes
"""

from __future__ import annotations

import argparse
import fcntl
import os
import selectors
import socket
import statistics
import struct
import termios
import threading
import time
from collections.abc import Callable


def _reader(port: int, streams: int, cpus: set[int]) -> None:
    """The forked reader: connects `streams` sockets and reads whatever comes until EOF."""
    os.sched_setaffinity(0, cpus)
    selector = selectors.DefaultSelector()
    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select(5):
            ready = key.fileobj
            assert isinstance(ready, socket.socket)
            try:
                data = ready.recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                os._exit(0)


def measure(streams: int, sizes: list[int], rounds: int, sendfile: bool) -> list[list[str]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(streams + 16)
    port = server.getsockname()[1]
    cpus = sorted(os.sched_getaffinity(0))
    child = os.fork()
    if child == 0:
        _reader(port, streams, set(cpus[1:]) or set(cpus))
    os.sched_setaffinity(0, {cpus[0]})
    connections = [server.accept()[0] for _ in range(streams)]
    for connection in connections:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.setblocking(False)  # sendfile() has no MSG_DONTWAIT
    lock = threading.Lock()
    rows = []

    def queued() -> bool:
        """Whether a socket has bytes its reader did not take yet."""
        empty = b"\0\0\0\0"
        return any(
            struct.unpack("i", fcntl.ioctl(c.fileno(), termios.TIOCOUTQ, empty))[0]
            for c in connections
        )

    for size in sizes:
        data = b"x" * size

        def sends(data: bytes = data) -> int:
            taken = 0
            for connection in connections:
                with lock:
                    try:
                        taken += connection.send(data, socket.MSG_DONTWAIT)
                    except BlockingIOError:
                        pass
            return taken

        def sendfiles(data: bytes = data) -> int:
            # A new file for each part: a page still referenced by a socket's queue must not
            # change, so a part is never written over.
            taken = 0
            part = os.memfd_create("part")
            try:
                os.write(part, data)
                for connection in connections:
                    with lock:
                        try:
                            taken += os.sendfile(connection.fileno(), part, 0, len(data))
                        except BlockingIOError:
                            pass
            finally:
                os.close(part)
            return taken

        def loop_alone() -> int:
            for connection in connections:
                with lock:
                    connection.fileno()
            return 0

        works = [sends, loop_alone, *([sendfiles] if sendfile else [])]
        costs: dict[Callable[[], int], list[float]] = {work: [] for work in works}
        taken = {work: 1.0 for work in works}
        for n in range(rounds):
            for work in works if n % 2 else works[::-1]:
                while queued():
                    time.sleep(0.01)  # the reader drains what was sent
                started = time.thread_time()
                took = work()
                costs[work].append(time.thread_time() - started)
                if work is not loop_alone:
                    taken[work] = min(taken[work], took / (size * streams))
        with_send, alone = (statistics.median(costs[w]) / streams * 1e6 for w in works[:2])
        row = [f"{size}", f"{with_send:.2f}", f"{alone:.2f}", f"{with_send - alone:.2f}"]
        if sendfile:
            by_file = statistics.median(costs[sendfiles]) / streams * 1e6
            row += [f"{by_file:.2f}", f"{by_file / with_send:.2f}"]
        row.append("/".join(f"{taken[w]:.2f}" for w in works if w is not loop_alone))
        rows.append(row)
    for connection in connections:
        connection.close()
    os.waitpid(child, 0)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--size", type=int, action="append", help="bytes a send (repeat)")
    parser.add_argument("--rounds", type=int, default=31)
    parser.add_argument(
        "--sendfile",
        action="store_true",
        help="also each part from a memory file by sendfile() (us/stream, the loop included;"
        " ratio: over send()'s)",
    )
    options = parser.parse_args()
    load = os.getloadavg()[0]
    rows = measure(options.streams, options.size or [200, 36_000], options.rounds, options.sendfile)
    print(
        f"{options.streams} loopback sockets, medians of {options.rounds} rounds, load {load:.1f}"
    )
    extra = f" {'sendfile':>9} {'ratio':>6}" if options.sendfile else ""
    print(f"{'bytes':>8} {'us/stream':>10} {'loop alone':>11} {'the send':>9}{extra} {'taken':>9}")
    for row in rows:
        extra = f" {row[4]:>9} {row[5]:>6}" if options.sendfile else ""
        print(f"{row[0]:>8} {row[1]:>10} {row[2]:>11} {row[3]:>9}{extra} {row[-1]:>9}")


if __name__ == "__main__":
    main()

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
to the file's pages instead of copying the bytes into it, which is what a round that carries
many commits (a part of 100 KB and more) spends most of its system time on (`_copy_from_iter`
in `perf`). The sockets are non-blocking for it, as a server's would have to be.

    python tools/bench/stream_sends.py                       # 200 B (an event) and 36 KB
    python tools/bench/stream_sends.py --size 200 --streams 1000
    python tools/bench/stream_sends.py --size 200 --size 36000 --size 250000 --sendfile
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Callable


def _reader(port: int, streams: int) -> None:
    """The forked reader: connects `streams` sockets and reads whatever comes until EOF."""
    selector = selectors.DefaultSelector()
    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select(5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            try:
                data = sock.recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                os._exit(0)


def measure(streams: int, sizes: list[int], rounds: int, sendfile: bool) -> list[list[str]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(streams + 16)
    port = server.getsockname()[1]
    child = os.fork()
    if child == 0:
        _reader(port, streams)
    connections = [server.accept()[0] for _ in range(streams)]
    for connection in connections:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.setblocking(False)  # sendfile() has no MSG_DONTWAIT
    lock = threading.Lock()
    rows = []
    for size in sizes:
        data = b"x" * size

        def sends(data: bytes = data) -> None:
            for connection in connections:
                with lock:
                    connection.send(data, socket.MSG_DONTWAIT)

        def sendfiles(data: bytes = data) -> None:
            # A new file for each part: a page still referenced by a socket's queue must not
            # change, so a part is never written over.
            part = os.memfd_create("part")
            try:
                os.write(part, data)
                for connection in connections:
                    with lock:
                        try:
                            os.sendfile(connection.fileno(), part, 0, len(data))
                        except BlockingIOError:
                            pass
            finally:
                os.close(part)

        def loop_alone() -> None:
            for connection in connections:
                with lock:
                    connection.fileno()

        def median_us(work: Callable[[], None]) -> float:
            costs = []
            for _ in range(rounds):
                started = time.thread_time()
                work()
                costs.append(time.thread_time() - started)
                time.sleep(0.05)  # the reader drains what was sent
            return statistics.median(costs) / streams * 1e6

        with_send, alone = median_us(sends), median_us(loop_alone)
        row = [f"{size}", f"{with_send:.2f}", f"{alone:.2f}", f"{with_send - alone:.2f}"]
        if sendfile:
            row.append(f"{median_us(sendfiles):.2f}")
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
        help="also each part from a memory file by sendfile() (us/stream, the loop included)",
    )
    options = parser.parse_args()
    load = os.getloadavg()[0]
    rows = measure(options.streams, options.size or [200, 36_000], options.rounds, options.sendfile)
    print(
        f"{options.streams} loopback sockets, medians of {options.rounds} rounds, load {load:.1f}"
    )
    extra = f" {'sendfile':>9}" if options.sendfile else ""
    print(f"{'bytes':>8} {'us/stream':>10} {'loop alone':>11} {'the send':>9}{extra}")
    for row in rows:
        extra = f" {row[4]:>9}" if options.sendfile else ""
        print(f"{row[0]:>8} {row[1]:>10} {row[2]:>11} {row[3]:>9}{extra}")


if __name__ == "__main__":
    main()

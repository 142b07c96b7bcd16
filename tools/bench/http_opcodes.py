"""The Python opcodes the HTTP server's threads run per `POST /exec`, by thread and function.

`pg_opcodes.py`'s counterpart for the HTTP API: a `PooledWSGIServer` over the `App` runs in
this process (its request log queued for a writer thread, as `refimpl serve` runs it) on an
engine instance in a throwaway folder with a real admin token; lean keep-alive clients in a
child process (`--clients` threads, one connection each, the headers `per_request.py`'s
clients send) run a point SELECT or a one-row INSERT (or, `--workload rev`, ask
GET /api/rev?table=t), and every opcode the server's threads run meanwhile is counted.
Unlike CPU time, the count does not depend on the machine's load, so two trees compare on
a busy machine too:

    python tools/bench/http_opcodes.py --workload insert
    PYTHONPATH=../before python tools/bench/http_opcodes.py --workload insert

It counts the whole served path, which `exec_in_process.py` leaves out: the epoll loop and
the admission places, re-arming, the flusher's thread and the delivery of durable answers,
the log writer. C code and the kernel do not show here; `per_request.py` measures them.
Tracing slows the server a hundredfold, so with several clients an INSERT's group commits
gather more of them than untraced.
"""

from __future__ import annotations

from bench_path import sibling  # first: see bench_path

# isort: split

import argparse
import contextlib
import io
import logging
import sys
import tempfile
import threading
from pathlib import Path

from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.app import App, AppOptions
from refimpl.http.serving.log_queue import queued_log
from refimpl.http.serving.server import PooledWSGIServer
from refimpl.log_format import TextLineFormatter

# pg_opcodes.py's counter.
pg_opcodes = sibling("pg_opcodes")

# The clients: each sends a request and reads its whole answer (Content-Length bodies:
# /exec's), warmed up first, then told to go on stdin.
CLIENT = r"""
import socket, sys, threading
port, token, workload, clients, runs = sys.argv[1:4] + [int(a) for a in sys.argv[4:6]]
go = threading.Event()
failed = []
def client(number, ready):
    sock = socket.create_connection(("127.0.0.1", int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    auth = f"Authorization: Bearer {token}\r\n"
    fixed = f"POST /exec HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: text/plain\r\n"
    buffer = b""
    def run(i):
        nonlocal buffer
        if workload == "rev":
            rev = f"GET /api/rev?table=t HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"
            sock.sendall(rev.encode())
        else:
            if workload == "select":
                sql = f"SELECT * FROM t WHERE id = {i % 100}"
            else:
                sql = f"INSERT INTO w VALUES ({(number + 1) * 10**9 + i}, 0.5, 'x')"
            body = sql.encode()
            head = f"{fixed}Content-Length: {len(body)}\r\n\r\n"
            sock.sendall(head.encode() + body)
        while b"\r\n\r\n" not in buffer:
            buffer += sock.recv(65536)
        head, _, buffer = buffer.partition(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            failed.append(head)
        size = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        while len(buffer) < size:
            buffer += sock.recv(65536)
        buffer = buffer[size:]
    for i in range(20):
        run(-1 - i)
    ready.release()
    go.wait()
    for i in range(runs):
        run(i)
    sock.close()
"""
CLIENT += pg_opcodes.CLIENT_TAIL + 'print("failed" if failed else "done", flush=True)\n'


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("select", "insert", "rev"), default="select")
    parser.add_argument("--runs", type=int, default=1000, help="requests per client")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--threads", type=int, default=16, help="the server's workers")
    parser.add_argument("--top", type=int, default=30, help="functions listed")
    args = parser.parse_args()
    counter = pg_opcodes.OpcodeCounter()
    # The server's text log lines, as `refimpl serve` writes them, into memory.
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(TextLineFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    with tempfile.TemporaryDirectory() as folder:
        instance = Instance.open(Path(folder))
        token = instance.access.ensure_admin()
        assert token is not None
        server: PooledWSGIServer | None = None
        app: App | None = None
        stack = contextlib.ExitStack()
        try:
            session = instance.session("demo", Principal("admin", is_admin=True))
            pg_opcodes.make_tables(session)
            session.close()
            threading.settrace(counter.trace)  # the server's threads, started below
            log_queue = stack.enter_context(queued_log())  # its writer thread too
            app = App(instance, AppOptions(threads=args.threads))
            if log_queue is not None:
                app.request_log.write_lines_to(log_queue.put)
            server = PooledWSGIServer("127.0.0.1", 0, app, args.threads)
            threading.Thread(target=server.serve_forever, args=(0.2,), daemon=True).start()
            command = [sys.executable, "-c", CLIENT, str(server.server_address[1]), token]
            command += [args.workload, str(args.clients), str(args.runs)]
            pg_opcodes.count_clients(counter, command)
        finally:
            threading.settrace(None)  # threads started from now on are not traced
            if server is not None:
                server.shutdown()
                server.drain()
                server.server_close()
            if app is not None:
                app.request_log.write_lines_to(None)
                app.begin_shutdown()
            stack.close()
            instance.close()
    pg_opcodes.report(counter, args.workload, args.runs * args.clients, args.top)


if __name__ == "__main__":
    main()

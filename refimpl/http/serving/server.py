"""Serving: a Werkzeug server with a bounded pool of worker threads and a graceful stop.

Werkzeug's `threaded=True` starts one thread per connection without limit, so a burst of
clients could start thousands of threads. Here a fixed pool of workers answers requests.

Connections are kept alive (HTTP/1.1) without tying up a worker: between requests a
connection sits in an epoll set that every idle worker waits on, and whichever worker the
kernel wakes answers the next request on it. So a thousand idle keep-alive clients cost file
descriptors, not threads, and a request never pays for a new TCP connection. A request runs
only once it has arrived whole (`wire.RequestReader`): until then its connection waits in
the set too, so a client that trickles its bytes holds no worker.
"""

from __future__ import annotations

import functools
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.serving import BaseWSGIServer

from refimpl.engine import admission
from refimpl.http.encode import Answer
from refimpl.http.request_log import RECORD_KEY, REQUEST_ID_HEADER, RequestRecord
from refimpl.http.serving import wire
from refimpl.http.serving.admission_queue import FifoSlots
from refimpl.http.serving.limits import (
    OUT_OF_DESCRIPTORS,
    ConnectionCounts,
    ConnectionLimits,
    DescriptorReserve,
    refuse,
)
from refimpl.waiting.parked import Parked, ParkedBody

log = logging.getLogger("refimpl.http")

CONNECTION_TIMEOUT_SECONDS = 60.0  # a started request must arrive whole within this
KEEP_ALIVE_SECONDS = 60.0  # a kept-alive connection is closed after this long unused
IDLE_CHECK_SECONDS = 1.0
WORKER_POLL_SECONDS = 0.5  # how soon an idle worker notices a stop
ADMITTED = 2  # requests running Python at once (see refimpl.engine.admission)
# A stream whose client has not taken this much of what was sent is dropped: a reader that
# stops reading costs bounded memory.
STREAM_UNSENT_LIMIT = 1024 * 1024
# Readable, then disarmed until the answer is sent: one worker per request.
_ARMED = select.EPOLLIN | select.EPOLLONESHOT
# A stream whose parts are all sent: readable once its client hangs up (or, against the
# protocol, sends something), which gives the stream up.
_HANG_UP = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT


# A WSGI application; one with a `waiting_room` (refimpl's App) has its parked requests
# answered without a worker.
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Connection:
    """One client connection, answered one request at a time by whichever worker is free."""

    def __init__(self, sock: socket.socket, client_address: Any, server: PooledWSGIServer):
        self.connection = sock
        self.client_address = client_address
        self.server = server
        # Blocking sends, with the kernel's own timeout: a Python-level timeout would add a
        # poll() system call before every send(). Requests are read without waiting (wire).
        sock.settimeout(None)
        limit = struct.pack("ll", int(CONNECTION_TIMEOUT_SECONDS), 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = wire.RequestReader(sock, server.max_body_bytes)
        self.counted = False  # counted in the server's ConnectionCounts until closed
        self.last_used = time.monotonic()
        self.busy = False  # taken by a worker or parked; guarded by the server's lock
        self.armed = 0  # the events its registration waits for now (0: it fired, or none)
        # A parked request, and how to answer it once decided.
        self.parked: Parked[Answer] | None = None
        self.parked_head: wire.RequestHead | None = None
        self.parked_keep = False
        # The parked request's record (refimpl's App makes one): finished at its answer.
        self.parked_record: RequestRecord | None = None
        # A long-lived answer sends many parts; its sends are ordered by this lock, and
        # what the socket did not take waits in `unsent` for a worker to send it.
        self.stream: Parked[Answer] | None = None
        self.stream_started = False
        self.stream_ended = False
        self.send_lock = threading.Lock()
        self.unsent = b""  # the part of a decided answer the socket did not take at once
        self.keep_after_unsent = False

    def stream_hung_up(self) -> bool:
        """True when the client of a stream closed its side or sent something."""
        try:
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) is not None
        except BlockingIOError:
            return False
        except OSError:
            return True

    def request_ready(self) -> bool:
        """True when a request can be served without waiting for the client (see wire)."""
        return self.reader.receive()

    def has_buffered_request(self) -> bool:
        """True when the next whole request was read already (pipelining)."""
        return self.reader.has_request()

    def serve_one(self) -> bool:
        """Answer one request; True when the connection stays open for another."""
        request = self.reader.next()
        if request is None:
            return False
        if isinstance(request, wire.MalformedRequest):
            self._send_bytes(wire.error_answer(request.status, request.message))
            return False
        try:
            environ = wire.make_environ(
                request, self.server.server_address, self.client_address
            )
            keep = self._run(request.head, environ)
        except (ConnectionError, TimeoutError, OSError):
            return False
        finally:
            request.close()
        self.last_used = time.monotonic()
        return keep

    def _run(self, head: wire.RequestHead, environ: dict[str, Any]) -> bool:
        keep = head.keep_alive
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None):
            answer[:] = [status, headers]
            return _refuse_write

        result = self.server.app(environ, start_response)
        if isinstance(result, ParkedBody):
            # Decided later by the waiting room; the server parks this connection meanwhile.
            self.parked, self.parked_head = result.parked, head
            self.parked_record = environ.get(RECORD_KEY)
        else:
            try:
                keep = self._send(head, answer[0], answer[1], result, keep)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        self.parked_keep = keep
        return keep

    def _send(self, head: wire.RequestHead, status: str, headers: list[tuple[str, str]],
              body: Iterable[bytes], keep: bool) -> bool:
        names = {name.lower() for name, _ in headers}
        code = int(status.split(" ", 1)[0])
        bodyless = head.method == "HEAD" or code in (204, 304) or code < 200
        chunked = False
        if "content-length" not in names and not bodyless:
            if head.version == "HTTP/1.1":
                chunked = True
            else:
                keep = False  # the end of the connection marks the end of the body
        pending = [wire.answer_head(status, headers, chunked=chunked, keep_alive=keep)]
        if not bodyless:
            for chunk in body:
                if not chunk:
                    continue
                pending.append(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                if sum(len(p) for p in pending) > 65536:
                    self._send_all(b"".join(pending))
                    pending = []
            if chunked:
                pending.append(b"0\r\n\r\n")
        self._send_all(b"".join(pending))  # small answers go out in one write
        return keep

    def _send_all(self, data: bytes) -> None:
        """Send all of `data`; a client slow to take it is waited for without a place."""
        try:
            sent = self.connection.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            admission.waiting()
            self.connection.sendall(memoryview(data)[sent:])

    def decided_answer(self, answer: Answer) -> tuple[bytes, bool]:
        """The bytes of a parked request's answer, and whether the connection stays open."""
        head, keep = self.parked_head, self.parked_keep
        assert head is not None
        data = wire.whole_answer(answer, keep, with_body=head.method != "HEAD")
        self.parked_head = None
        record, self.parked_record = self.parked_record, None
        if record is not None:
            # After the shared bytes are made: readers answered together share them.
            data = wire.with_header(data, REQUEST_ID_HEADER, record.request_id)
            record.finish(answer.status_code)
        return data, keep

    def stream_bytes(self, answer: Answer, last: bool) -> bytes:
        """The bytes of one part of a long-lived answer: its head first, then chunks."""
        data = b""
        record = self.parked_record
        if not self.stream_started:
            self.stream_started = True
            headers = answer.headers
            if record is not None:
                headers = [*headers, (REQUEST_ID_HEADER, record.request_id)]
            data = wire.answer_head(answer.status, headers, chunked=True,
                                    keep_alive=self.parked_keep)  # fmt: skip
        if answer.body:
            data += wire.chunk(answer)  # b"" + chunk is the chunk itself: no copy
        if last:
            data += b"0\r\n\r\n"
            self.finish_record(answer.status_code)
        return data

    def finish_record(self, status: int) -> None:
        """Log and count the parked request (a stream's at its end, or when dropped)."""
        record, self.parked_record = self.parked_record, None
        if record is not None:
            record.finish(status)

    def _send_bytes(self, data: bytes) -> None:
        try:
            self.connection.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.reader.close()
        try:
            self.connection.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        self.connection.close()
        if self.counted:
            self.counted = False
            self.server.counts.release(self.client_address[0])


def _refuse_write(data: bytes) -> None:
    raise RuntimeError("the WSGI write() callable is not supported; return the body")


class PooledWSGIServer(BaseWSGIServer):
    """A `BaseWSGIServer` whose requests are answered by `threads` worker threads.

    Every open connection is registered, one-shot, in one epoll set that all workers wait
    on; the kernel wakes a single worker per readable connection, and that worker answers
    the request itself. A request thus costs one thread wake-up: no dispatcher thread, no
    queue between threads. A connection is never in two workers at once: its registration
    fires once and is re-armed only after its answer is sent.
    """

    multithread = True  # tells Werkzeug (and WSGI apps) that requests run concurrently
    daemon_threads = False

    def __init__(
        self, host: str, port: int, app: WSGIApp, threads: int,
        limits: ConnectionLimits | None = None,
        max_body_bytes: int = wire.DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        super().__init__(host, port, app)
        self.threads = threads
        self.counts = ConnectionCounts(limits or ConnectionLimits())
        self.max_body_bytes = max_body_bytes  # larger bodies: 413 before they are read
        self._reserve = DescriptorReserve()
        self._epoll = select.epoll()
        self._connections: dict[int, Connection] = {}  # by file descriptor
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._next_idle_check = time.monotonic() + IDLE_CHECK_SECONDS
        # Requests admitted to run at once; more would only queue for the interpreter lock.
        # A request that waits (a commit's flush, a lock) or runs long makes way early.
        # Costly requests hold at most all places but one: one always answers cheap ones.
        self._admission = FifoSlots(ADMITTED, long_places=ADMITTED - 1)
        room = getattr(app, "waiting_room", None)
        self._gate: threading.Lock | None = getattr(room, "gate", None)
        self._after_round: Callable[[Callable[[], None]], None] = getattr(
            room, "after_round", lambda action: action()
        )
        metrics = getattr(app, "metrics", None)
        if metrics is not None:
            metrics.read_connections(self.counts.total)
        self._workers = [
            threading.Thread(target=self._work, name=f"kdb-http-{n}", daemon=True)
            for n in range(threads)
        ]
        for worker in self._workers:
            worker.start()

    def get_request(self) -> tuple[socket.socket, Any]:
        try:
            return self.socket.accept()
        except OSError as error:
            if error.errno in OUT_OF_DESCRIPTORS:
                self._reserve.refuse_one(self.socket)
            raise  # socketserver skips this round

    def process_request(self, request: Any, client_address: Any) -> None:
        refused = self.counts.admit(client_address[0])
        if refused is not None:
            refuse(request, refused)
            return
        try:
            handler = Connection(request, client_address, self)
        except OSError:
            self.counts.release(client_address[0])
            self.shutdown_request(request)
            return
        handler.counted = True
        if self._stopping.is_set():
            handler.close()
            return
        fd = request.fileno()
        with self._lock:
            self._connections[fd] = handler
        self._epoll.register(fd, _ARMED)

    def _work(self) -> None:
        # Only a worker that holds an admission place waits on the epoll set, and it keeps
        # its place from one request to the next. Under load it thus finds the next ready
        # connection without blocking, and the other workers sleep on the admission queue
        # instead of waking for each request only to queue for the interpreter lock (each
        # such wake-up costs context switches and the lock's hand-overs). A request that
        # waits or runs long hands its place on, and another worker takes over the polling.
        while not self._stopping.is_set():
            self._admission.acquire()
            admission.admitted(self._admission.release, self._admission)
            try:
                while admission.holding() and not self._stopping.is_set():
                    self._poll_once()
            finally:
                admission.done()

    def _poll_once(self) -> None:
        try:
            events = self._epoll.poll(WORKER_POLL_SECONDS, 1)
        except OSError:  # the set was closed: we are stopping
            return
        self._close_idle()  # also under load: a trickled request's deadline must hold
        if not events:
            return
        fd = events[0][0]
        if self._gate is not None:
            with self._gate:  # a round of waiting answers goes out first
                pass
        with self._lock:
            handler = self._connections.get(fd)
            if handler is None or handler.busy:
                return
            handler.busy = True
            watched = handler.armed == _HANG_UP
            handler.armed = 0
        self._answer(handler, watched)

    def _answer(self, handler: Connection, watched: bool = False) -> None:
        keep = True
        try:
            serve = True
            if watched or handler.stream is not None:
                self._stream_event(handler)
                return
            if handler.unsent:
                data, handler.unsent = handler.unsent, b""
                handler.connection.sendall(data)
                keep = handler.keep_after_unsent
                serve = keep and handler.has_buffered_request()
            while serve and not self._stopping.is_set():
                if not handler.request_ready():
                    break  # the rest of the request comes later: wait for it in the set
                admission.request_started()
                try:
                    keep = handler.serve_one()
                finally:
                    admission.request_ended()  # a costly request's long place goes back
                parked = handler.parked
                if parked is not None:
                    handler.parked = None
                    if parked.streaming:
                        handler.stream = parked
                        parked.on_ready(
                            functools.partial(self._stream_part, handler, last=True),
                            functools.partial(self._stream_part, handler, last=False),
                        )
                    else:
                        parked.on_ready(functools.partial(self._deliver, handler))
                    return  # parked: still busy, answered by `_deliver` or `_stream_part`
                serve = keep and handler.has_buffered_request()
        except Exception:
            self.handle_error(handler.connection, handler.client_address)
            keep = False
        self._release(handler, keep)

    def _stream_event(self, handler: Connection) -> None:
        """A stream's connection is writable again, or its hang-up watch fired.

        Decided under the send lock: a watch that fires while the stream's last part goes out
        (its client read the end and sent its next request) finds the stream over and leaves
        the connection to the end, which re-arms it for that request."""
        with handler.send_lock:
            if handler.stream is None:
                return
            if handler.stream_hung_up():
                self._drop_stream(handler)
                return
        self._flush_stream(handler)

    def _deliver(self, handler: Connection, answer: Answer) -> None:
        """Send a parked request's answer without blocking (the waiting room calls this)."""
        data, keep = handler.decided_answer(answer)
        try:
            sent = handler.connection.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._release(handler, False)
            return
        if sent < len(data):
            # A slow client: a worker sends the rest once the socket takes more.
            handler.unsent, handler.keep_after_unsent = data[sent:], keep
            self._rearm(handler, select.EPOLLOUT | select.EPOLLONESHOT)
            return
        self._after_round(functools.partial(self._release, handler, keep))

    def _stream_part(self, handler: Connection, answer: Answer, *, last: bool) -> None:
        """Send one part of a long-lived answer without blocking (the deciding thread).

        What the socket does not take waits, and a worker sends it once it takes more; a
        client that leaves more than STREAM_UNSENT_LIMIT untaken is dropped.
        """
        with handler.send_lock:
            if handler.stream is None:
                return  # dropped already
            handler.unsent += handler.stream_bytes(answer, last)
            handler.stream_ended = last
            if len(handler.unsent) > STREAM_UNSENT_LIMIT:
                self._drop_stream(handler)
                return
            # Sent under the same hold of the lock: one part of a fan-out round costs one
            # lock and one send() per socket.
            then = self._send_unsent(handler)
        if then is not None:
            then()

    def _flush_stream(self, handler: Connection) -> None:
        """Send what a stream has waiting; re-arm for writing, finish, or drop."""
        with handler.send_lock:
            if handler.stream is None:
                return
            then = self._send_unsent(handler)
        if then is not None:
            then()

    def _send_unsent(self, handler: Connection) -> Callable[[], None] | None:
        """Send what a stream has waiting (the caller holds its send lock, and calls what
        this gives once it let go: the stream's next part, or the connection's release)."""
        stream = handler.stream
        assert stream is not None
        try:
            sent = handler.connection.send(handler.unsent, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._drop_stream(handler)
            return None
        handler.unsent = handler.unsent[sent:]
        if handler.unsent:
            self._rearm(handler, select.EPOLLOUT | select.EPOLLONESHOT)
            return None
        if not handler.stream_ended:
            # Watched for its client's hang-up meanwhile: a closed stream stops counting
            # against its caller's limits at once, not at its next heartbeat. Armed once,
            # not at every part: an epoll_ctl per event costs a thousand streams.
            if handler.armed != _HANG_UP:
                self._rearm(handler, _HANG_UP)
            return stream.drained  # parked on: the stream makes its next part now
        handler.stream = None
        handler.stream_started = handler.stream_ended = False
        release = functools.partial(self._release, handler, handler.parked_keep)
        return functools.partial(self._after_round, release)

    def _drop_stream(self, handler: Connection) -> None:
        """Give up on a stream's client (the caller holds its send lock)."""
        stream, handler.stream = handler.stream, None
        handler.unsent = b""
        # What the client got before it was given up on: the stream's head, or nothing.
        handler.finish_record(200 if handler.stream_started else 499)
        if stream is not None:
            stream.drop()
        self._release(handler, False)

    def _release(self, handler: Connection, keep: bool) -> None:
        """Wait for the connection's next request, or close it."""
        handler.last_used = time.monotonic()
        if keep and not self._stopping.is_set():
            # Bytes already read (a pipelined request): writable fires at once, a worker serves.
            events = _ARMED | select.EPOLLOUT if handler.has_buffered_request() else _ARMED
            if self._rearm(handler, events):
                return
        fd = handler.connection.fileno()
        with self._lock:
            self._connections.pop(fd, None)
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):
            pass
        handler.close()

    def _rearm(self, handler: Connection, events: int) -> bool:
        with self._lock:
            handler.busy = False
            handler.armed = events
        try:
            self._epoll.modify(handler.connection.fileno(), events)
        except (OSError, ValueError):  # stopped meanwhile
            with self._lock:
                handler.busy = True
            return False
        return True

    def _close_idle(self) -> None:
        now = time.monotonic()
        if now < self._next_idle_check:
            return
        self._next_idle_check = now + IDLE_CHECK_SECONDS
        with self._lock:
            idle = [
                (fd, handler)
                for fd, handler in self._connections.items()
                if not handler.busy
                and handler.stream is None  # a stream lives as long as its heartbeats go out
                and (
                    now - handler.last_used > KEEP_ALIVE_SECONDS
                    or now - (handler.reader.started_at or now) > CONNECTION_TIMEOUT_SECONDS
                )
            ]
            for fd, handler in idle:
                del self._connections[fd]
                handler.busy = True
                self._epoll.unregister(fd)
        for _, handler in idle:
            if handler.reader.started_at is not None:
                # The deadline counts from the request's first byte, however it trickles.
                timeout = int(CONNECTION_TIMEOUT_SECONDS)
                late = wire.error_answer(408, f"the request did not arrive whole within"
                                         f" {timeout} s of its first byte; send it at once")
                try:
                    handler.connection.send(late, socket.MSG_DONTWAIT)
                except OSError:
                    pass
            handler.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The app answers its own errors; what arrives here is a broken connection or a bug
        # in serving. Log it once, without the request data.
        log.warning("connection from %s ended with an error", client_address, exc_info=True)

    def drain(self) -> None:
        """Wait until every started request has been answered; close the idle connections."""
        self._stopping.set()
        self._admission.open_all()
        with self._lock:
            busy = [handler for handler in self._connections.values() if handler.busy]
        for handler in busy:
            # A request still arriving will not be answered now: its read ends at once.
            # Sending is untouched, so requests that are running still get their answers.
            try:
                handler.connection.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        for worker in self._workers:
            worker.join()
        with self._lock:
            handlers = list(self._connections.values())
            self._connections.clear()
        self._epoll.close()
        for handler in handlers:
            handler.close()
        self._reserve.close()


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
import threading
import time
from collections.abc import Callable
from typing import Any

from werkzeug.serving import BaseWSGIServer

from refimpl.engine import admission
from refimpl.errors import RequestTimeout
from refimpl.http.encode import Answer
from refimpl.http.error_answers import closing_answer
from refimpl.http.request_log import REQUEST_ID_HEADER
from refimpl.http.serving import wire
from refimpl.http.serving.connection import CONNECTION_TIMEOUT_SECONDS, Connection, WSGIApp
from refimpl.http.serving.fanout_sends import HANG_UP as _HANG_UP
from refimpl.http.serving.fanout_sends import STREAM_UNSENT_LIMIT as STREAM_UNSENT_LIMIT
from refimpl.http.serving.fanout_sends import FanoutSends
from refimpl.http.serving.heads import named_answer_bytes
from refimpl.http.serving.limits import (
    OUT_OF_DESCRIPTORS,
    ConnectionCounts,
    ConnectionLimits,
    DescriptorReserve,
    refuse,
)
from refimpl.netpool.polling import ARMED as _ARMED
from refimpl.netpool.polling import PollingWorkers
from refimpl.waiting.acknowledgements import Acknowledgement

log = logging.getLogger("refimpl.http")

KEEP_ALIVE_SECONDS = 60.0  # a kept-alive connection is closed after this long unused
IDLE_CHECK_SECONDS = 1.0
WORKER_POLL_SECONDS = 0.5  # how soon an idle worker notices a stop


class PooledWSGIServer(FanoutSends, BaseWSGIServer):
    """A `BaseWSGIServer` whose requests are answered by `threads` worker threads.

    Every open connection is registered, one-shot, in one epoll set that the workers wait
    on (`refimpl.netpool.polling`); the kernel wakes a single worker per readable
    connection, and that worker answers the request itself. A request thus costs one thread
    wake-up: no dispatcher thread, no queue between threads. A connection is never in two
    workers at once: its registration fires once and is re-armed only after its answer is
    sent.
    """

    multithread = True  # tells Werkzeug (and WSGI apps) that requests run concurrently
    daemon_threads = False

    def __init__(
        self,
        host: str,
        port: int,
        app: WSGIApp,
        threads: int,
        limits: ConnectionLimits | None = None,
        max_body_bytes: int = wire.DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        super().__init__(host, port, app)
        self.threads = threads
        self.counts = ConnectionCounts(limits or ConnectionLimits())
        self.max_body_bytes = max_body_bytes  # larger bodies: 413 before they are read
        self._reserve = DescriptorReserve()
        self._connections: dict[int, Connection] = {}  # by file descriptor
        self._lock = threading.Lock()
        self._next_idle_check = time.monotonic() + IDLE_CHECK_SECONDS
        # A few requests run at once (`polling.ADMITTED`); one that waits (a commit's
        # flush, a lock) or runs long makes way early.
        # One event a wait: a worker serves the events it took in turn, so a second one
        # taken behind a costly request (a long scan, an import) would wait for it while other
        # workers are free (4fad389 took 4: a commit waited out a scan under load).
        self._workers = PollingWorkers(
            "kdb-http", threads, self._event, self._close_idle, WORKER_POLL_SECONDS
        )
        self._epoll = self._workers.epoll
        self._stopping = self._workers.stopping
        room = getattr(app, "waiting_room", None)
        self._gate: threading.Lock | None = getattr(room, "gate", None)
        self._after_round: Callable[[Callable[[], None]], None] = getattr(
            room, "after_round", lambda action: action()
        )
        # The room's rounds' state on their threads: a round whose `answers_next` is set
        # (woken long polls' on the owner pool) may answer its connections' next requests
        # itself (`_answer_next`).
        self._round_state: object = getattr(room, "round_state", None)
        if room is not None:
            # Parts many streams share: one send a socket, the shared bytes made once.
            room.share_with(self._send_shared, self._send_headed)
        metrics = getattr(app, "metrics", None)
        if metrics is not None:
            metrics.read_connections(self.counts.total)
        self._workers.start()

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
            handler.armed = _ARMED
        self._epoll.register(fd, _ARMED)

    def _event(self, fd: int, mask: int = 0) -> None:
        """A connection is readable (or writable again): answered here, on the woken worker
        (`mask`, the events epoll reported, is not needed: every registration is one-shot)."""
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

    def _answer(self, handler: Connection, watched: bool = False, once: bool = False) -> None:
        """Serve the connection's requests that came whole, until one parks or none is left
        (`once`: one only), then wait for its next (`_release`)."""
        keep = True
        try:
            serve = True
            if watched or handler.stream is not None:
                self._stream_event(handler)
                return
            if handler.rest:
                if not self._send_rest(handler):
                    return  # the socket took what it could: watched for writing again
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
                            outlet=handler,
                        )
                    elif isinstance(parked, Acknowledgement):
                        self._prepare(handler, parked)
                    else:
                        parked.on_ready(functools.partial(self._deliver, handler))
                    return  # parked: still busy, answered by `_deliver` or `_stream_part`
                if handler.rest:
                    self._wait_writable(handler)
                    return  # its next request is served once the answer went whole
                serve = keep and not once and handler.has_buffered_request()
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

    def _prepare(self, handler: Connection, parked: Acknowledgement[Answer]) -> None:
        """A write's acknowledgement: the bytes of its answer made now, while its flush runs
        (they do not depend on it), so that the thread that publishes the flush only sends
        them. Nothing is sent before it is decided; an error decided instead (a failed
        flush) is made and sent as any parked answer is (`_deliver`)."""
        head, record = handler.parked_head, handler.parked_record
        assert head is not None
        answer, keep, with_body = parked.answer, handler.parked_keep, head.method != "HEAD"
        if record is None:
            data = wire.answer_bytes(answer, keep, with_body)
        else:
            data = named_answer_bytes(answer, keep, with_body, REQUEST_ID_HEADER, record.request_id)
        # The callback holds no reference to `parked` (which keeps it): no reference cycle.
        parked.on_ready(functools.partial(self._acknowledge, handler, answer, data))

    def _acknowledge(
        self, handler: Connection, prepared: Answer, data: bytes, answer: Answer
    ) -> None:
        """Send a write's decided acknowledgement (the thread that publishes its flush, or
        the room's): `data`, made by `_prepare`, when `answer` is the one they are of
        (`prepared`); else as any parked answer (`_deliver`)."""
        if answer is not prepared:
            self._deliver(handler, answer)
            return
        handler.parked_head = None
        record, handler.parked_record = handler.parked_record, None
        if record is not None:
            record.finish(answer.status_code)
        keep = handler.parked_keep
        if self._send_decided(handler, data, keep):
            # At once, not after a round (`_deliver`): an acknowledgement is decided by the
            # flush's publication, not in a round of readers, and brings no reader back.
            self._release(handler, keep)

    def _deliver(self, handler: Connection, answer: Answer) -> None:
        """Send a parked request's answer without blocking (the waiting room calls this)."""
        data, keep = handler.decided_answer(answer)
        if self._send_decided(handler, data, keep):
            then = self._release
            if keep and getattr(self._round_state, "answers_next", False):
                then = self._answer_next
            self._after_round(functools.partial(then, handler, keep))

    def _answer_next(self, handler: Connection, keep: bool, look_again: bool = True) -> None:
        """`_release` of a connection answered in a round of woken long polls, on the round's
        thread once its answers are all sent: its next request, when the client sent it
        whole meanwhile and it repeats the one answered but for its id (the long poll asking
        again), is served here, at once, as a worker would serve it: no worker woken, no
        epoll_ctl to arm the connection nor epoll_wait to find it. Any other request (one
        that could cost more than a re-poll's park) goes to a worker, as by `_release`.

        None yet: looked at once more (`look_again`) after the round's other connections
        (`after_round` from within the round's end runs it after them): their clients'
        re-polls, served meanwhile, gave this one's client time to send its own. About half
        of the re-polls of 10 woken long polls came after the first look, each a worker's
        wake-up. Still none then: a worker serves it when it comes."""
        try:
            if not self._stopping.is_set():
                if handler.request_ready():
                    if handler.repeat_waits():
                        self._answer(handler, once=True)
                        return
                elif look_again:
                    self._after_round(functools.partial(self._answer_next, handler, keep, False))
                    return
        except Exception:
            self.handle_error(handler.connection, handler.client_address)
            keep = False
        self._release(handler, keep)

    def _send_decided(self, handler: Connection, data: bytes, keep: bool) -> bool:
        """Send a decided answer's bytes without blocking; True when they went whole (the
        caller releases the connection), else the connection is the server's again."""
        try:
            sent = handler.connection.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._release(handler, False)
            return False
        if sent < len(data):
            # A slow client: a worker sends the rest once the socket takes more.
            handler.keep_rest(data, sent, keep)
            self._wait_writable(handler)
            return False
        return True

    def _send_rest(self, handler: Connection) -> bool:
        """Send what the socket takes of a whole answer's rest (`Connection.rest`); True
        once all of it went (or the client went away: the connection then closes), else the
        connection waits to be writable again. A client never holds a thread: one that takes
        nothing for KEEP_ALIVE_SECONDS, or not the whole by its deadline (`send_limits`),
        is closed (`_close_idle`)."""
        rest = handler.rest
        try:
            sent = handler.connection.send(rest, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except OSError:  # the client went away: nothing more to send it
            sent, handler.keep_after_unsent = len(rest), False
        if sent < len(rest):
            handler.rest = rest[sent:]
            self._wait_writable(handler)
            return False
        handler.rest = memoryview(b"")
        return True

    def _wait_writable(self, handler: Connection) -> None:
        """Watch a connection whose answer has a rest to send for writing; its idle time
        counts from now, each time its client took some."""
        handler.last_used = time.monotonic()
        self._rearm(handler, select.EPOLLOUT | select.EPOLLONESHOT)

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

    def _add_unsent(self, handler: Connection, data: bytes) -> None:
        """`data` after what a stream has waiting (a worker sends it, the socket being
        watched for writing already), or the stream dropped past the limit."""
        handler.unsent += data
        if len(handler.unsent) > STREAM_UNSENT_LIMIT:
            self._drop_stream(handler)

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
        idle: list[tuple[int, Connection]] = []
        with self._lock:
            # One look at each connection (a hundred parked streams are busy: passed over).
            for fd, handler in self._connections.items():
                if handler.busy:
                    continue
                if handler.kept_environ is not None:
                    # What its routes kept for its repeats is made again at its next: a
                    # dropped database a kept /exec session holds is let go within a look.
                    handler.forget_kept()
                if handler.stream is None and (  # a stream lives while its heartbeats go out
                    now - handler.last_used > KEEP_ALIVE_SECONDS
                    or now - (handler.reader.started_at or now) > CONNECTION_TIMEOUT_SECONDS
                    or handler.overdue(now)  # its answer's whole is late, however it trickles
                ):
                    idle.append((fd, handler))
            for fd, handler in idle:
                del self._connections[fd]
                handler.busy = True
                self._epoll.unregister(fd)
        for _, handler in idle:
            if handler.rest:
                log.warning(
                    "closed the connection from %s: its answer was not taken whole in time"
                    " (%d bytes left)",
                    handler.client_address[0],
                    len(handler.rest),
                )
            elif handler.reader.started_at is not None:
                # The deadline counts from the request's first byte, however it trickles.
                timeout = int(CONNECTION_TIMEOUT_SECONDS)
                late = closing_answer(
                    RequestTimeout(
                        f"the request did not arrive whole within"
                        f" {timeout} s of its first byte; send it at once"
                    )
                )
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
        self._workers.stop()
        with self._lock:
            busy = [handler for handler in self._connections.values() if handler.busy]
        for handler in busy:
            # A request still arriving will not be answered now: its read ends at once.
            # Sending is untouched, so requests that are running still get their answers.
            try:
                handler.connection.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        self._workers.join()
        with self._lock:
            handlers = list(self._connections.values())
            self._connections.clear()
        self._epoll.close()
        for handler in handlers:
            handler.close()
        self._reserve.close()

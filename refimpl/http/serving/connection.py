"""One client connection of the pooled server: its request reader and its answers' bytes.

A connection is answered one request at a time by whichever worker is free
(`server.PooledWSGIServer`); a parked request's answer, and a stream's parts, are sent
later by the thread that decides them. What a connection uses of its server is `Host`.
"""

from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from wsgiref.types import WSGIApplication

from refimpl.engine import admission
from refimpl.errors import MalformedRequest
from refimpl.http.auth import CREDENTIALS_KEY, ConnectionCredentials
from refimpl.http.encode import Answer
from refimpl.http.error_answers import closing_answer
from refimpl.http.request_input import WHOLE_BODY_KEY
from refimpl.http.request_log import RECORD_KEY, REQUEST_ID_HEADER, RequestRecord
from refimpl.http.route_memo import MEMO_KEY, RouteMemo
from refimpl.http.serving import wire
from refimpl.http.serving.environ import connection_environ, make_environ
from refimpl.http.serving.heads import HeadTemplate, template_of
from refimpl.http.serving.limits import ConnectionCounts
from refimpl.netpool import send_limits
from refimpl.waiting.parked import READER, Parked, ParkedBody

log = logging.getLogger("refimpl.http")

CONNECTION_TIMEOUT_SECONDS = 60.0  # a started request must arrive whole within this
# Statuses whose answers have no body (and 1xx): sent by the general path.
_BODYLESS = frozenset({100, 101, 102, 103, 204, 304})
# From this size on a body is sent after its head as it is (`_send_answer`); a small one is
# copied behind its head, one buffer for one send.
SPLIT_BODY_BYTES = 256 * 1024

# A WSGI application; one with a `waiting_room` (refimpl's App) has its parked requests
# answered without a worker.
WSGIApp = WSGIApplication


class Host(Protocol):
    """What a connection uses of its server."""

    app: WSGIApp
    server_address: Any
    max_body_bytes: int
    counts: ConnectionCounts


class Connection:
    """One client connection, answered one request at a time by whichever worker is free."""

    def __init__(self, sock: socket.socket, client_address: Any, server: Host):
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
        self.environ_base = connection_environ(server.server_address, client_address)
        # An app with `answer(environ)` (refimpl's App) answers without the WSGI calls.
        self.answer_of: Callable[[dict[str, Any]], Any] | None = getattr(server.app, "answer", None)
        # Its bearer token checked once for all its requests that send the same header.
        self.credentials = ConnectionCredentials()
        # The environ of the request the reader takes repeats of, by its head's fields.
        self.kept_environ: tuple[dict[str, str], dict[str, Any]] | None = None
        self.counted = False  # counted in the server's ConnectionCounts until closed
        self.last_used = time.monotonic()
        self.busy = False  # taken by a worker or parked; guarded by the server's lock
        self.armed = 0  # the events its registration waits for now (0: it fired, or none)
        # A parked request, and how to answer it once decided.
        self.parked: Parked[Answer] | None = None
        self.parked_head: wire.RequestHead | None = None
        self.parked_keep = False
        self.parked_alone = False  # its answer goes to it alone (not shared with others)
        # The parked request's record (refimpl's App makes one): finished at its answer.
        self.parked_record: RequestRecord | None = None
        # The head of its last parked answer's kind (a long poll's: the next is alike).
        self.head_template: HeadTemplate | None = None
        # A long-lived answer sends many parts; its sends are ordered by this lock, and
        # what the socket did not take waits in `unsent` for a worker to send it.
        self.stream: Parked[Answer] | None = None
        self.stream_started = False
        self.stream_ended = False
        self.send_lock = threading.Lock()
        self.unsent = b""  # the part of a stream's parts the socket did not take at once
        # The part of a whole answer the socket did not take at once (empty: none), and
        # whether the connection stays open once it is sent.
        self.rest = memoryview(b"")
        self.keep_after_unsent = False
        # By when a whole answer's rest must have been taken (`send_limits`).
        self.send_deadline = 0.0
        # How long the client of a streamed body may still keep its worker waiting
        # (`send_limits`: the grace, plus the allowance of the parts given so far, less the
        # time waited already).
        self.send_budget = 0.0

    def stream_hung_up(self) -> bool:
        """True when the client of a stream closed its side or sent something."""
        try:
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) is not None
        except BlockingIOError:
            return False
        except OSError:
            return True

    def keep_rest(self, data: bytes, sent: int, keep: bool) -> None:
        """Keep what the socket did not take of a whole answer (`data`, of which `sent` went
        out just now) for the server to send as the client takes it, by its deadline."""
        self.rest, self.keep_after_unsent = memoryview(data)[sent:], keep
        self.send_deadline = send_limits.send_deadline(time.monotonic(), len(data))

    def overdue(self, now: float) -> bool:
        """True when a whole answer's rest is still unsent past its deadline."""
        return bool(self.rest) and now > self.send_deadline

    def request_ready(self) -> bool:
        """True when a request can be served without waiting for the client (see wire)."""
        return self.reader.receive()

    def has_buffered_request(self) -> bool:
        """True when the next whole request was read already (pipelining)."""
        return bool(self.reader.ready)  # a whole request, or the connection's end, waits

    def repeat_waits(self) -> bool:
        """True when the next request read whole repeats the connection's kept one but for
        its `id=` value (`RequestReader.take`: a long poll asking again), not its body."""
        ready = self.reader.ready
        kept = self.kept_environ
        if not ready or kept is None or self.reader.repeats_body:
            return False
        request = ready[0]
        return type(request) is wire.ReceivedRequest and request.head.fields is kept[0]

    def forget_kept(self) -> None:
        """Let go of what a route kept for this connection's repeats (`RouteMemo.kept`),
        made again at the next repeat. Call it only while no request of the connection runs
        (not `busy`): an `/exec` session kept there holds its database, which a DROP
        DATABASE must free even while the connection idles."""
        kept = self.kept_environ
        if kept is not None:
            memo = kept[1].get(MEMO_KEY)
            if memo is not None:
                memo.forget()

    def serve_one(self) -> bool:
        """Answer one request; True when the connection stays open for another."""
        ready = self.reader.ready  # `RequestReader.next`, one call fewer
        request = ready.popleft() if ready else None
        if request is None:
            return False
        if isinstance(request, MalformedRequest):
            self._send_bytes(closing_answer(request))
            return False
        try:
            head = request.head
            kept = self.kept_environ
            if kept is not None and head.fields is kept[0]:
                # A repeat of the last request but for its id= value or its body
                # (`RequestReader.take`): its environ, the target's keys new (its path and
                # query alone, no fragment), and the body's.
                target = head.target
                environ = {
                    **kept[1],
                    "QUERY_STRING": target.partition("?")[2],
                    "REQUEST_URI": target,
                    "RAW_URI": target,
                    "wsgi.input": request.body,
                    WHOLE_BODY_KEY: request.data,
                }
                if request.has_body:
                    environ["CONTENT_LENGTH"] = str(request.body_length)
            else:
                environ = make_environ(request, self.environ_base)
                environ[CREDENTIALS_KEY] = self.credentials
                if request.data is not None:
                    environ[WHOLE_BODY_KEY] = request.data  # the body read from it, at no cost
                self.forget_kept()  # another request: its repeats' memo is another
                self.kept_environ = None
                if request is self.reader.repeated:
                    # Its repeats go where it went (route_memo), and have its environ, as it
                    # is before the app adds its own keys to it.
                    environ[MEMO_KEY] = RouteMemo(self.reader.repeats_body)
                    self.kept_environ = (head.fields, environ.copy())
            return self._run(head, environ)  # the server notes `last_used` after it
        except (ConnectionError, TimeoutError, OSError):
            return False
        finally:
            request.body.close()  # `request.close()`: a temporary file goes away with it

    def _run(self, head: wire.RequestHead, environ: dict[str, Any]) -> bool:
        keep = head.keep_alive
        app: WSGIApp = self.server.app
        if self.answer_of is not None:
            # refimpl's App: its answer itself, without the WSGI calls around it.
            handled = self.answer_of(environ)
            if isinstance(handled, Parked):
                return self._park(handled, environ, head, keep)
            if type(handled) is Answer and handled.status_code not in _BODYLESS:
                self._send_answer(handled, keep, head.method != "HEAD")
                self.parked_keep = keep
                return keep
            app = handled  # a Werkzeug Response, say: a WSGI application of its own
        answer: list[Any] = []

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: object = None
        ) -> Callable[[bytes], None]:
            answer[:] = [status, headers]
            return _refuse_write

        result = app(environ, start_response)
        if isinstance(result, ParkedBody):
            return self._park(result.parked, environ, head, keep)
        if type(result) is Answer and result.status_code not in _BODYLESS:
            # Most answers: its bytes made in one piece, its Content-Length its own.
            self._send_answer(result, keep, head.method != "HEAD")
        else:
            try:
                keep = self._send(head, answer[0], answer[1], result, keep)
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        self.parked_keep = keep
        return keep

    def _park(
        self, parked: Parked[Answer], environ: dict[str, Any], head: wire.RequestHead, keep: bool
    ) -> bool:
        """Decided later by the waiting room; the server parks this connection meanwhile."""
        self.parked, self.parked_head, self.parked_keep = parked, head, keep
        self.parked_record = environ.get(RECORD_KEY)
        # Change-stream readers at one position may share an answer (its bytes then made
        # once for all); any other is its request's alone: a write's acknowledgement, and a
        # live query's long poll, whose answer its own poll makes.
        self.parked_alone = parked.kind is not READER
        return keep

    def _send(
        self,
        head: wire.RequestHead,
        status: str,
        headers: list[tuple[str, str]],
        body: Iterable[bytes],
        keep: bool,
    ) -> bool:
        code = int(status[:3])  # a WSGI status begins with its three digits
        bodyless = head.method == "HEAD" or code in (204, 304) or code < 200
        chunked = False
        if not bodyless and not wire.has_length(headers):
            if head.version == "HTTP/1.1":
                chunked = True
            else:
                keep = False  # the end of the connection marks the end of the body
        self.send_budget = send_limits.SEND_GRACE_SECONDS
        pending = [wire.answer_head(status, headers, chunked=chunked, keep_alive=keep)]
        if not bodyless:
            size = 0  # of the chunks in `pending`: sent on past 64 KB
            for chunk in body:
                if not chunk:
                    continue
                pending.append(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
                size += len(chunk)
                if size > 65536:
                    self._send_all(b"".join(pending))
                    pending, size = [], 0
            if chunked:
                pending.append(b"0\r\n\r\n")
        self._send_all(b"".join(pending))  # small answers go out in one write
        return keep

    def _send_answer(self, answer: Answer, keep: bool, with_body: bool) -> None:
        """Send a whole answer as `_send_or_keep` does. A large body (a page of 10,000
        changes: 1.4 MB) goes out after its head in one sendmsg, not copied behind it: the
        copy cost its worker a memcpy and about 340 page faults of fresh memory a page; its
        head and body are joined only for a client that does not take them at once."""
        body = answer.body
        if not with_body or len(body) < SPLIT_BODY_BYTES:
            self._send_or_keep(wire.answer_bytes(answer, keep, with_body), keep)
            return
        head = wire.answer_head_bytes(answer, keep, with_body)
        try:
            sent = self.connection.sendmsg((head, body), (), socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        if sent < len(head) + len(body):
            self.keep_rest(head + body, sent, keep)

    def _send_or_keep(self, data: bytes, keep: bool) -> None:
        """Send what the socket takes of a whole answer now; the rest waits in `rest` (the
        server watches the connection for writing and sends it as the client takes it), so
        that no thread waits on a client that reads slowly or not at all (a worker held
        there would hold its admission place too, and the thread answering a round of long
        polls the rounds behind it)."""
        try:
            sent = self.connection.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        if sent < len(data):
            self.keep_rest(data, sent, keep)

    def _send_all(self, data: bytes) -> None:
        """Send all of `data`, a part of a streamed answer whose budget (`send_budget`)
        this part extends; a client slow to take it is waited for without a place, until
        the budget is spent (TimeoutError, logged: the connection closes) or for a pause of
        at most CONNECTION_TIMEOUT_SECONDS (an OSError). Only this waiting spends the
        budget: the time the app takes to make the parts (a slow query's rows) does not,
        so a client taking each part as it comes is never cut off."""
        self.send_budget += send_limits.send_allowance(len(data))
        try:
            sent = self.connection.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        if sent == len(data):
            return
        admission.waiting()
        waited_from = time.monotonic()
        try:
            self._send_by(memoryview(data)[sent:], waited_from + self.send_budget)
        finally:
            self.send_budget -= time.monotonic() - waited_from

    def _send_by(self, rest: memoryview, deadline: float) -> None:
        """All of `rest` as the client takes it, by `deadline` (see `_send_all`)."""
        # poll, not select: a server of many connections holds sockets numbered past
        # select's FD_SETSIZE (1,024).
        writable = select.poll()
        writable.register(self.connection, select.POLLOUT)
        while rest:
            left = deadline - time.monotonic()
            if left <= 0:
                log.warning(
                    "closed the connection from %s: its streamed answer was not taken whole"
                    " by its deadline",
                    self.client_address[0],
                )
                raise TimeoutError("the answer was not taken whole by its deadline")
            # Woken when the socket takes more, or at the deadline: a blocking send would
            # wait out the kernel's whole SO_SNDTIMEO, past the deadline.
            writable.poll(1000 * min(left, CONNECTION_TIMEOUT_SECONDS))
            try:
                rest = rest[self.connection.send(rest, socket.MSG_DONTWAIT) :]
            except BlockingIOError:
                if left > CONNECTION_TIMEOUT_SECONDS:  # not writable for that long
                    raise TimeoutError("the client took nothing for too long") from None

    def decided_answer(self, answer: Answer) -> tuple[bytes, bool]:
        """The bytes of a parked request's answer, and whether the connection stays open."""
        head, keep = self.parked_head, self.parked_keep
        assert head is not None
        with_body = head.method != "HEAD"
        self.parked_head = None
        record, self.parked_record = self.parked_record, None
        if record is None:
            return wire.whole_answer(answer, keep, with_body), keep
        if self.parked_alone:
            data = self._alone_bytes(answer, keep, with_body, record.request_id)
        else:
            # After the shared bytes are made: readers answered together share them.
            data = wire.whole_answer(answer, keep, with_body)
            data = wire.with_header(data, REQUEST_ID_HEADER, record.request_id)
        record.finish(answer.status_code)
        return data, keep

    def _alone_bytes(self, answer: Answer, keep: bool, with_body: bool, request_id: str) -> bytes:
        """The bytes of a parked answer its request's alone, its request id last: from the
        head of the last such answer when this one's is alike (a long poll's, answer after
        answer), else made, and its head kept for the next."""
        template = self.head_template
        if template is not None and with_body:
            data = template.bytes_of(answer, keep, REQUEST_ID_HEADER, request_id)
            if data is not None:
                return data
        if with_body:
            self.head_template = template_of(answer, keep, REQUEST_ID_HEADER)
        return wire.answer_bytes(answer, keep, with_body, (REQUEST_ID_HEADER, request_id))

    def stream_bytes(self, answer: Answer, last: bool) -> bytes:
        """The bytes of one part of a long-lived answer: its head first, then chunks."""
        data = b""
        record = self.parked_record
        if not self.stream_started:
            self.stream_started = True
            headers = answer.headers
            if record is not None:
                headers = [*headers, (REQUEST_ID_HEADER, record.request_id)]
            data = wire.answer_head(
                answer.status, headers, chunked=True, keep_alive=self.parked_keep
            )
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
        self.forget_kept()
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

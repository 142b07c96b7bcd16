"""Sending one part to many streams at once (`WaitingRoom.share_with`): a part the streams
share whole (`send_shared`), or one body after each stream's own head (`send_headed`), one
send() a socket under each stream's send lock. The server (`PooledWSGIServer`) mixes this
in: what a client does not take waits as a stream's rest, which the server's workers send.
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterable

from refimpl.http.encode import Answer
from refimpl.http.serving import wire
from refimpl.http.serving.connection import Connection

# A stream whose client has not taken this much of what was sent is dropped: a reader that
# stops reading costs bounded memory.
STREAM_UNSENT_LIMIT = 1024 * 1024
# A stream whose parts are all sent: readable once its client hangs up (or, against the
# protocol, sends something), which gives the stream up.
HANG_UP = select.EPOLLIN | select.EPOLLRDHUP | select.EPOLLONESHOT


class FanoutSends:
    """The server's sends of a fan-out round's parts (`_send_shared`, `_send_headed`)."""

    # The server's (`PooledWSGIServer`): a rest kept for its workers, a stream given up on,
    # a connection's registration armed again.
    _add_unsent: Callable[[Connection, bytes], None]
    _drop_stream: Callable[[Connection], None]
    _rearm: Callable[[Connection, int], bool]

    def _send_shared(
        self,
        outlets: Iterable[Connection],
        answer: Answer,
        on_backlog: Callable[[Connection], None],
    ) -> None:
        """One part many streams share (`WaitingRoom.send_shared`) to streams whose head went
        out: its chunk made once, one send() a socket. What a client does not take waits as
        `_stream_part`'s rest would; `on_backlog` hears of it first, before `drained` can.

        A large part is copied into each socket all the same: sent from one memory file by
        sendfile() instead, it cost more CPU a stream at every size from 32 to 256 KB (the
        kernel takes a reference to each of its pages for every socket, which costs more than
        copying them; `tools/bench/stream_sends.py --sendfile`), and the sockets' memory
        is counted and bounded alike either way."""
        data = wire.chunk(answer)
        size, flags = len(data), socket.MSG_DONTWAIT  # read once, not once a stream
        for handler in outlets:
            # Taken and let go by its methods: `with` looks up and binds __enter__ and
            # __exit__ at each stream, which doubled the lock's cost (2,000 instructions
            # a stream against 940, callgrind).
            lock = handler.send_lock
            lock.acquire()
            try:
                if handler.stream is None:
                    continue  # dropped meanwhile
                if handler.unsent:  # a worker sends it, and this after it
                    on_backlog(handler)
                    self._add_unsent(handler, data)
                    continue
                try:
                    sent = handler.connection.send(data, flags)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self._drop_stream(handler)
                    continue
                if sent != size:
                    on_backlog(handler)
                    self._keep_rest(handler, data, sent)
            finally:
                lock.release()

    def _send_headed(self, parts: Iterable[tuple[Connection, bytes]], body: bytes) -> None:
        """Parts that end alike (`WaitingRoom.send_headed`) to streams whose head went out:
        each its chunk whole (the size line, its own head, `body`, the chunk's end) made in
        one join and sent in one send() (a sendmsg() of the head and the shared body took
        three times a send()'s instructions to build its buffers, more than copying a part
        of a few hundred bytes). The size lines are made once a head's length (the heads of
        one query's streams are mostly one length): a `%x` format a stream cost more than
        the join. A stream whose part went whole is told so (`drained`, once
        the send locks are let go), as `_send_unsent` tells it; else the rest waits and a
        worker sends it, as `_stream_part`'s rest would."""
        tail = body + b"\r\n"
        size, flags = len(body), socket.MSG_DONTWAIT  # read once, not once a stream
        sent_whole: list[Callable[[], None]] = []
        went_whole = sent_whole.append
        lines: dict[int, bytes] = {}  # the chunks' size lines, by their head's length
        for handler, head in parts:
            with handler.send_lock:
                stream = handler.stream
                if stream is None or stream.finished:
                    continue  # dropped, or its last part decided, meanwhile
                line = lines.get(len(head))
                if line is None:
                    line = lines[len(head)] = b"%x\r\n" % (len(head) + size)
                data = b"".join((line, head, tail))
                if handler.unsent:  # a heartbeat's rest: this goes after it, with it
                    self._add_unsent(handler, data)
                    continue
                try:
                    sent = handler.connection.send(data, flags)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self._drop_stream(handler)
                    continue
                if sent == len(data):
                    if handler.armed != HANG_UP:
                        self._rearm(handler, HANG_UP)
                    went_whole(stream.drained)
                    continue
                self._keep_rest(handler, data, sent)
        for drained in sent_whole:
            drained()

    def _keep_rest(self, handler: Connection, data: bytes, sent: int) -> None:
        """What a stream's socket did not take of `data` waits for a worker to send it when
        the socket can take more, or drops the stream if more than STREAM_UNSENT_LIMIT is
        left (the send lock held)."""
        handler.unsent = data[sent:]
        if len(data) - sent > STREAM_UNSENT_LIMIT:
            self._drop_stream(handler)
        else:
            self._rearm(handler, select.EPOLLOUT | select.EPOLLONESHOT)

"""Notifications between sessions (PostgreSQL's LISTEN and NOTIFY), and each committed
change of a table as a notification on the table's channel, `kdb_changes.<table>`.

The engine knows no sockets: a `Listener` is one connection's side, told of new
notifications by its `wake` callback (cheap, never blocking), and its connection takes them
with `Listener.take` when it may send them. What a caller may rely on:

- `NotificationHub.publish` hands committed notifications to every listener of their
  channel in the database they were sent in, in order. A listener holds at most
  `QUEUE_BYTES` of them (channel and payload bytes); one more overflows it: its queue is
  emptied and `overflowed` is set, and its connection is expected to end (a listener that
  does not read must neither stall the others nor hold unbounded memory).
- A table channel holds nothing in memory: its listener keeps a position in the change
  stream, and `take` reads the changes after it from the log, never past the durable LSN,
  at most `CHANGES_PER_TAKE` at a time. Each change's payload is its JSON object of the
  change stream (`lsn`, `seq`, `committed_at`, `op`, `key`, `row`); one longer than
  `MAX_PAYLOAD_BYTES` is sent without its row, with `"truncated": true`, for the client to
  read with `changes()`. LISTEN needs READ on the table, and a table that does not exist is
  refused the same way as one the caller may not read (`Forbidden`). Each take checks the
  right again: once it is gone (or the table is dropped, or the log no longer holds the
  position), the channel sends one last payload `{"error": ..., "lsn": ...}` and stops.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from refimpl.engine.features.change_stream import Change
from refimpl.engine.feeds import ChangeFeeds, TableFeed
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.storage import values
from refimpl.engine.tracking.signals import CommitSignal
from refimpl.errors import BadRequest, Forbidden, KdbError, NotFound, Unauthorized

TABLE_CHANNEL = "kdb_changes."  # followed by a table's name
MAX_PAYLOAD_BYTES = 7999  # PostgreSQL's: a payload is shorter than 8000 bytes
MAX_CHANNEL_BYTES = 63  # PostgreSQL's NAMEDATALEN - 1
QUEUE_BYTES = 1024 * 1024  # what one listener holds unread, at most
CHANGES_PER_TAKE = 1000  # a table channel's changes read at one take, at most
SERVER_PID = 0  # the process id a table channel's notifications carry


class Notification(NamedTuple):
    channel: str
    payload: str
    pid: int  # the process id of the session that sent it


@dataclass(slots=True)
class _TableWatch:
    """A table channel of one listener: the table and how far its changes were sent."""

    channel: str
    table: str
    after_lsn: int
    durable: Callable[[], int]  # the database's durable LSN now
    seen: int = 0  # the durable LSN when its changes were last read
    ended: bool = False

    def behind(self) -> bool:
        return not self.ended and self.durable() > self.seen


class Listener:
    """One connection's LISTENs and the notifications waiting for it; thread-safe."""

    def __init__(
        self, hub: NotificationHub, database: str, principal: Principal, wake: Callable[[], None]
    ) -> None:
        self._hub = hub
        self.database = database
        self.principal = principal
        self._wake = wake
        self._lock = threading.Lock()
        self.channels: set[str] = set()
        self._tables: dict[str, _TableWatch] = {}
        self._queue: deque[Notification] = deque()
        self._bytes = 0
        self._changed = False  # a commit may have made table changes to read
        self.overflowed = False

    def put(self, note: Notification) -> None:
        size = len(note.channel) + len(note.payload.encode("utf-8"))
        with self._lock:
            if self.overflowed:
                return
            if self._bytes + size > QUEUE_BYTES:
                self.overflowed = True
                self._queue.clear()
                self._bytes = 0
            else:
                self._queue.append(note)
                self._bytes += size
        self._wake()

    def changed(self) -> None:
        """A commit of the database made its durable LSN move (table channels may have news)."""
        if self._tables:
            self._changed = True
            self._wake()

    def waiting(self) -> bool:
        """Whether `take` may have something (without reading the log): a commit became
        durable since a table channel's last read counts, however its wake-up is timed."""
        if self._queue or self._changed or self.overflowed:
            return True
        return any(w.behind() for w in list(self._tables.values()))

    def take(self) -> list[Notification]:
        """The notifications waiting, oldest first, then the table channels' new changes."""
        with self._lock:
            taken = list(self._queue)
            self._queue.clear()
            self._bytes = 0
            self._changed = False
            watches = [w for w in self._tables.values() if not w.ended]
        for watch in watches:
            taken += self._hub.read_table(self, watch)
        return taken

    def watch_table(self, channel: str, feed: TableFeed) -> None:
        durable = feed.bounds().durable_lsn  # what is durable at LISTEN is not sent
        bounds = feed.bounds
        watch = _TableWatch(channel, feed.table, durable, lambda: bounds().durable_lsn, durable)
        with self._lock:
            self._tables.setdefault(channel, watch)

    def unwatch(self, channel: str | None) -> None:
        with self._lock:
            if channel is None:
                self._tables.clear()
            else:
                self._tables.pop(channel, None)

    def more_later(self) -> None:
        """A take stopped before the end of a table's changes: take again soon."""
        self._changed = True
        self._wake()


class NotificationHub:
    """The listeners of one instance's databases, by channel."""

    def __init__(self, instance: Instance) -> None:
        self._feeds = ChangeFeeds(instance)
        self._lock = threading.Lock()
        self._by_channel: dict[tuple[str, str], set[Listener]] = {}
        self._watching: dict[str, set[Listener]] = {}  # database -> listeners of tables
        self._signals: list[CommitSignal] = []  # the commit signals listened to

    def listener(self, database: str, principal: Principal, wake: Callable[[], None]) -> Listener:
        return Listener(self, database, principal, wake)

    def listen(self, listener: Listener, channel: str) -> None:
        """Add `channel` to the listener's; Forbidden for a table channel of a table the
        caller may not read or that does not exist."""
        check_channel(channel)
        if channel.startswith(TABLE_CHANNEL):
            feed = self._table_feed(listener, channel)
            listener.watch_table(channel, feed)
            with self._lock:
                signal = feed.signal
                if all(s is not signal for s in self._signals):
                    self._signals.append(signal)
                    database = feed.database
                    signal.listen(lambda: self._commit(database))
                self._watching.setdefault(feed.database.lower(), set()).add(listener)
        with self._lock:
            self._by_channel.setdefault((listener.database.lower(), channel), set()).add(listener)
        listener.channels.add(channel)

    def unlisten(self, listener: Listener, channel: str | None) -> None:
        """Drop `channel` from the listener's (every one of them for None)."""
        channels = list(listener.channels) if channel is None else [channel]
        with self._lock:
            for name in channels:
                found = self._by_channel.get((listener.database.lower(), name))
                if found is not None:
                    found.discard(listener)
                    if not found:
                        del self._by_channel[(listener.database.lower(), name)]
                listener.channels.discard(name)
            if not any(c.startswith(TABLE_CHANNEL) for c in listener.channels):
                self._watching.get(listener.database.lower(), set()).discard(listener)
        for name in channels:
            if name.startswith(TABLE_CHANNEL):
                listener.unwatch(name)

    def publish(self, database: str, notes: list[Notification]) -> None:
        """Hand committed notifications to their channels' listeners."""
        for note in notes:
            with self._lock:
                listeners = list(self._by_channel.get((database.lower(), note.channel), ()))
            for listener in listeners:
                listener.put(note)

    def _commit(self, database: str) -> None:
        with self._lock:
            listeners = list(self._watching.get(database.lower(), ()))
        for listener in listeners:
            listener.changed()

    def _table_feed(self, listener: Listener, channel: str) -> TableFeed:
        table = channel[len(TABLE_CHANNEL) :]
        try:
            return self._feeds.table_feed(listener.database, table, listener.principal)
        except (Forbidden, NotFound, Unauthorized):
            # The same answer for a table that does not exist as for one the caller may
            # not read, so that it tells nothing of which tables there are.
            raise Forbidden(
                f"LISTEN {channel}: user '{listener.principal.name}' may read no table"
                f" '{table}' in database '{listener.database}' (a table channel needs READ"
                " on its table)"
            ) from None

    def read_table(self, listener: Listener, watch: _TableWatch) -> list[Notification]:
        """The table's changes after the watch's position, as notifications."""
        watch.seen = watch.durable()
        try:
            feed = self._table_feed(listener, watch.channel)
            batch = feed.read(watch.after_lsn, CHANGES_PER_TAKE)
        except KdbError as error:
            watch.ended = True
            ending = {"error": error.message, "lsn": watch.after_lsn}
            return [Notification(watch.channel, json.dumps(ending), SERVER_PID)]
        watch.after_lsn = batch.next_lsn
        if batch.more:
            listener.more_later()
        names = feed.column_names
        times = [i for i, n in enumerate(names) if feed.column_types[n] == "TIMESTAMP"]
        return [
            Notification(watch.channel, change_payload(change, names, times), SERVER_PID)
            for change in batch.changes
        ]


def change_payload(change: Change, names: tuple[str, ...], times: list[int]) -> str:
    """A change's JSON object of the change stream; without its row (`truncated`) when
    longer than MAX_PAYLOAD_BYTES."""
    cells = list(change.row)
    for at in times:
        if cells[at] is not None:
            cells[at] = values.format_timestamp(cells[at])
    committed_at = (
        values.format_timestamp(change.committed_at) if change.committed_at is not None else None
    )
    head: dict[str, Any] = {
        "lsn": change.lsn,
        "seq": change.seq,
        "committed_at": committed_at,
        "op": change.op,
        "key": change.key,
    }
    whole = json.dumps({**head, "row": dict(zip(names, cells, strict=True))}, ensure_ascii=False)
    if len(whole.encode("utf-8")) <= MAX_PAYLOAD_BYTES:
        return whole
    cut = json.dumps({**head, "truncated": True}, ensure_ascii=False)
    if len(cut.encode("utf-8")) <= MAX_PAYLOAD_BYTES:
        return cut
    return json.dumps({**head, "key": None, "truncated": True})  # a key past the limit


def check_channel(channel: str) -> None:
    """A channel's name: not empty, at most MAX_CHANNEL_BYTES bytes (BadRequest)."""
    if not channel or len(channel.encode("utf-8")) > MAX_CHANNEL_BYTES:
        raise BadRequest(
            f"a channel's name takes 1 to {MAX_CHANNEL_BYTES} bytes, not"
            f" {len(channel.encode('utf-8'))}"
        )


_HUBS: weakref.WeakKeyDictionary[Instance, NotificationHub] = weakref.WeakKeyDictionary()
_HUBS_LOCK = threading.Lock()


def hub_of(instance: Instance) -> NotificationHub:
    """The one hub of an instance (made at its first use)."""
    with _HUBS_LOCK:
        hub = _HUBS.get(instance)
        if hub is None:
            hub = _HUBS[instance] = NotificationHub(instance)
        return hub

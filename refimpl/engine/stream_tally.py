"""What the event streams sent, counted for `/metrics`: events by database and name, and
each `reset` by its reason (`measures.StreamCounts` keeps the counts).

What a caller may rely on: `StreamTally.taken` is given every take of a stream or of a
group of streams, with the place the take started from (`stands_after`), and counts its
events once for each stream they are sent to; a take without a `reset` costs one pass over
its events and no look at the log.
"""

from __future__ import annotations

from collections.abc import Sequence

from refimpl.engine.features.event_cursor import (
    RESET,
    Event,
    EventCursor,
    Transactions,
)
from refimpl.engine.measures import StreamCounts
from refimpl.errors import Gone


class StreamTally:
    """Counts the takes of one database's streams into `counts`; `recent` is that
    database's recent transactions, where a reset's transaction is looked up."""

    def __init__(self, counts: StreamCounts, database: str, recent: Transactions):
        self._counts = counts
        self._database = database
        self._recent = recent

    def taken(self, events: Sequence[Event], streams: int = 1, after: int = -1) -> None:
        """One take's events, sent to `streams` streams that stood after LSN `after` (-1:
        not known); each `reset` counted by its reason: `copy_restart` (id 0: a stream with
        its initial copy reads it again), `rows_replaced` (its id is a transaction after
        `after` that replaced a table's rows as a whole: TRUNCATE, DROP TABLE, a dropped
        partition), else `lost_place` (a resume or a reader the replay window or the log no
        longer reaches)."""
        kinds: dict[str, int] = {}
        for event in events:
            kinds[event.kind] = kinds.get(event.kind, 0) + 1
        self._counts.sent(self._database, kinds, streams)
        if RESET in kinds:  # rare: the look at the log below costs nothing most takes
            for event in events:
                if event.kind == RESET:
                    self._counts.reset(self._reason(event.id, after), streams)

    def timed_out(self) -> None:
        """A stream's own work ran past the statement timeout: it ends with a `reset`."""
        self._counts.reset("timeout")

    def _reason(self, event_id: str, after: int) -> str:
        if event_id == "0":
            return "copy_restart"
        if event_id.isdigit() and int(event_id) > after and self._replaced(int(event_id)):
            return "rows_replaced"
        return "lost_place"

    def _replaced(self, lsn: int) -> bool:
        """Whether transaction `lsn` replaced a table's rows as a whole (a reset of its own)."""
        try:
            for txn in self._recent.after(lsn - 1):
                return txn.lsn == lsn and any(item.kind == RESET for item in txn.items)
        except Gone:
            pass
        return False


def stands_after(cursor: object) -> int:
    """The LSN a plain stream's cursor stands after (a resume's, before its first take);
    -1 for a stream with changefeed options, whose place is not an LSN."""
    if not isinstance(cursor, EventCursor):
        return -1
    resume = cursor.resume
    return max(cursor.position.after_lsn, -1 if resume is None else resume.after_lsn)

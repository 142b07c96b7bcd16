"""The write-ahead log: segmented, CRC-framed, fsync'd, with group commit.

A log is a folder of segment files (framing in `refimpl.engine.storage.wal_segments`).
Each record is one committed transaction, an opaque payload, numbered by LSN 1, 2, 3, ...

What callers may rely on:

- `append` is called by one writer at a time (the database write lock) and only buffers; a
  record is acknowledged by `wait_durable`, which returns only once the record and everything
  before it are written and fsync'd (and the folder fsync'd when a segment file was created).
  Concurrent waiters share one fsync (group commit). `when_durable` has a call made once a
  record is durable (or the log failed), by the thread whose flush made it so.
- After a write or fsync error nothing more is ever acknowledged: the log stays failed and every
  later `append`, `wait_durable` and `remove_through` raises `WritesStopped`. Only a restart,
  which recovers from what is on disk, writes again.
- `read` sees exactly the records up to `durable_lsn` at the time of the call, in LSN order, never
  a hole or a duplicate; it raises `Gone` for positions older than the log keeps.
- Opening cuts back a torn tail (reported in `recovery_messages`) and refuses damage, a whole
  frame that fails its checksum included, with `CorruptLog` naming the file, the byte offset
  and the LSNs that cutting it would lose (`wal_repair` inspects and cuts it for the operator).
  The folder is listed once, when opening.
"""

from __future__ import annotations

import os
import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import ParamSpec
from zlib import crc32

from refimpl.engine import admission
from refimpl.engine.files import REAL_FILES, UNSUPPORTED, FileOps, write_all, write_all_synced
from refimpl.engine.measures import LatencyHistogram
from refimpl.engine.storage.wal_crc import KnownTail
from refimpl.engine.storage.wal_gather import MAX_SECONDS, Gather
from refimpl.engine.storage.wal_opening import failure_message, recover
from refimpl.engine.storage.wal_reading import gone_message, read_failure, run_reads
from refimpl.engine.storage.wal_recent import RecentRecords
from refimpl.engine.storage.wal_seals import remove_seal, write_seal
from refimpl.engine.storage.wal_segments import (
    HEADER_SIZE,
    INDEX_EVERY,
    LENGTH_CRC,
    LSN_FIELD,
    MAX_PAYLOAD,
    ReadStep,
    Segment,
    SegmentInfo,
    frame_runs,
    segment_name,
    segment_runs,
)
from refimpl.engine.storage.wal_zeros import DEFAULT_ZERO_PLAN, ZeroAhead, ZeroPlan
from refimpl.errors import Gone, WritesStopped

__all__ = ["DEFAULT_SEGMENT_BYTES", "SegmentInfo", "WriteAheadLog"]

P = ParamSpec("P")
DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024
_KEPT_BYTES = 1 << 20  # a payload this large with a known checksum is not copied at append
# Written at the log's end, which zeros written ahead of it (`wal_zeros`) put before the file's.
_OPEN_FLAGS = os.O_WRONLY | os.O_CREAT


class WriteAheadLog:
    """A segmented write-ahead log with group commit; see the module docstring for guarantees.

    Thread safety: `append` (one writer at a time), `wait_durable` (any number of threads),
    `read` (any number, each with its own file handles) and `remove_through` may run at once.
    """

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync_delay: float = 0.0,
        files: FileOps = REAL_FILES,
        zeros: ZeroPlan | None = DEFAULT_ZERO_PLAN,
    ) -> None:
        """Opens (creating if missing) and recovers the log in `directory`.

        `fsync_delay` is for benchmarks only: every fsync additionally sleeps that many seconds,
        as a slow disk's flush would. Every change to a file goes through `files` (tests inject
        failures through it). `zeros`: how the log writes zeros ahead of its end (`wal_zeros`;
        None: never). Raises `CorruptLog` for damage other than a torn tail.
        """
        if segment_bytes < 1:
            raise ValueError("segment_bytes must be at least 1")
        self._directory = Path(directory)
        self._segment_bytes = segment_bytes
        self._fsync_delay = fsync_delay
        self._files = files
        self._zeros = ZeroAhead(files, zeros) if zeros is not None else None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # durable_lsn moved, leader done, closed
        self._waiting = 0  # threads in `_wait`: a flush that ends with none notifies none
        self._remove_lock = threading.Lock()  # one remove_through at a time, in LSN order
        self._fsync_count = 0
        self._queued_appends = 0  # appends that found an earlier record not yet durable
        self.fsync_seconds = LatencyHistogram()  # every fsync's duration, for /metrics
        self._last_batch_commits = 0  # commits the last flush covered
        self._last_flush_seconds = 0.0  # how long it took
        self._failure: str | None = None
        self._closing = False
        self._closed = False
        self._flushing = False  # a leader is writing and syncing outside the lock
        self._gather = Gather()  # a leader's wait for its batch to fill (see its module)
        # (LSN, call) of `when_durable`, called by the leader whose flush makes the LSN durable.
        self._at_durable: list[tuple[int, Callable[[], object]]] = []
        # Frames appended but not yet handed to a leader, grouped by segment in LSN order.
        self._pending: list[tuple[Segment, bytearray]] = []
        # `_pending`'s last buffer while appends may add to it (a flush takes it: None).
        self._tail: bytearray | None = None
        # The file the leader writes to; touched only by the current leader (or by close once no
        # leader runs), so it needs no lock.
        self._write_segment: Segment | None = None
        self._write_fd: int | None = None
        self._write_dirty = False
        self._one_call = True  # the leader writes and syncs in one call (leader-only)
        self._doing = ""  # what the leader is doing, for its failure message (leader-only)
        self._segments, self.recovery_messages = recover(self._directory, files, self._timed)
        # The sum of the segments' sizes, kept as they grow and go: a group commit reads it
        # (`Database._maybe_checkpoint`) at every flush, which summing the segments would
        # make cost a step per segment kept.
        self._total_bytes = sum(segment.size for segment in self._segments)
        # The segment appends went to last and that has no seal yet: sealed when the leader
        # moves on to the next one (leader-only, like the write segment).
        self._unsealed: Segment | None = self._segments[-1] if self._segments else None
        self._active = self._unsealed  # the last segment, where appends go (None: no segment)
        self._last_lsn = self._segments[-1].last_lsn if self._segments else 0
        self._durable_lsn = self._last_lsn
        # Every frame up to here had its checksum checked by the open (a seal's, or its own).
        self._checked_lsn = self._last_lsn
        self.recent = RecentRecords()  # the newest appended, durable or not (see its module)

    # --- properties -------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def segment_bytes(self) -> int:
        """The size at which the active segment is closed and a new one begun."""
        return self._segment_bytes

    @segment_bytes.setter
    def segment_bytes(self, size: int) -> None:
        if size < 1:
            raise ValueError("segment_bytes must be at least 1")
        self._segment_bytes = size

    @property
    def durable_lsn(self) -> int:
        """The last LSN written and fsync'd; 0 when nothing is."""
        return self._durable_lsn

    @property
    def last_lsn(self) -> int:
        """The last LSN appended (durable or not); 0 for an empty log."""
        return self._last_lsn

    @property
    def oldest_lsn(self) -> int:
        """The first LSN still kept on disk; `last_lsn + 1` when the log holds no record."""
        with self._lock:
            return self._oldest_locked()

    @property
    def total_bytes(self) -> int:
        """The sum of all segment sizes in the index (appended but unflushed frames included)."""
        return self._total_bytes

    @property
    def queued_appends(self) -> int:
        """How many appends so far found an earlier record not yet durable: commits queued
        behind another's flush (the group commit). Two readings differ when writers queued
        in between (the event streams' fan-out waits only then)."""
        return self._queued_appends

    @property
    def fsync_count(self) -> int:
        """How many fsyncs (files and folder) this log has issued since it was opened."""
        return self._fsync_count

    def segments(self) -> list[SegmentInfo]:
        """A snapshot of the in-memory segment index, oldest first."""
        with self._lock:
            return [segment.info() for segment in self._segments]

    def _oldest_locked(self) -> int:
        return self._segments[0].first_lsn if self._segments else self._last_lsn + 1

    # --- writing ----------------------------------------------------------------------------

    def append(
        self, payload: bytes | bytearray | memoryview, known: KnownTail | None = None
    ) -> int:
        """Buffers `payload` as the next record and returns its LSN; nothing is fsync'd yet.

        The caller holds the database write lock, so LSNs follow the order of calls. Raises
        `WritesStopped` once the log has failed or is closed. With `known` (the checksum of
        most of the payload, made before the lock), the frame's checksum costs next to
        nothing; a large bytearray payload is then kept as it is, not copied, until it is
        written: the caller must not change it.
        """
        size = len(payload)
        if size > MAX_PAYLOAD:
            raise ValueError(f"a log record holds at most {MAX_PAYLOAD} bytes, not {size}")
        # Every commit appends: the lock by acquire and release (`with` costs more), the frame's
        # header (`frame_header`) and the record's entry (see `Segment`) written out here.
        lock = self._lock
        lock.acquire()
        try:
            if self._failure is not None:
                raise WritesStopped(self._failure)
            if self._closing:
                raise WritesStopped(f"the write-ahead log in {self._directory} is closed")
            last = self._last_lsn
            lsn = last + 1
            # First: a bad payload type changes nothing (crc32 refuses it).
            lsn_bytes = LSN_FIELD.pack(lsn)
            seed = crc32(lsn_bytes)
            crc = crc32(payload, seed) if known is None else known.checksum(payload, seed)
            if last > self._durable_lsn:
                self._queued_appends += 1
            segment = self._active
            if segment is None or (
                segment.size >= self._segment_bytes and segment.last_lsn >= segment.first_lsn
            ):
                path = self._directory / segment_name(lsn)
                segment = self._active = Segment(lsn, path, on_disk=False)
                self._segments.append(segment)
                self._tail = None
            tail = self._tail
            if tail is None:  # the first frame since a flush took the buffer, or of a segment
                tail = self._tail = bytearray()
                self._pending.append((segment, tail))
            tail += LENGTH_CRC.pack(size, crc)
            tail += lsn_bytes
            if known is not None and isinstance(payload, bytearray) and size >= _KEPT_BYTES:
                # Written from where it is: no copy of a bulk load's record under the lock.
                self._pending.append((segment, payload))
                self._tail = None
            else:
                tail += payload
            offset = segment.size
            if (lsn - segment.first_lsn) % INDEX_EVERY == 0:
                segment.index_lsns.append(lsn)
                segment.index_offsets.append(offset)
            segment.last_lsn = lsn
            frame_size = HEADER_SIZE + size
            segment.size = offset + frame_size
            self._total_bytes += frame_size
            self.recent.add(lsn, payload)
            self._last_lsn = lsn
            gather = self._gather
            if gather.lsn and lsn >= gather.lsn:
                gather.open()
            return lsn
        finally:
            lock.release()

    def wait_durable(self, lsn: int) -> None:
        """Blocks until record `lsn` and all before it are on disk (group commit).

        The first waiter that finds no flush running leads: it writes everything appended so far
        and fsyncs once for all of it, while later waiters wait for it (and the next leader takes
        whatever was appended meanwhile). Raises `WritesStopped` if the log has failed, also when
        the failure happened in another thread's flush.
        """
        if lsn > self._durable_lsn:
            admission.waiting()  # a flush to wait for, or to lead: others may run meanwhile
        with self._cond:
            while True:
                if self._failure is not None:
                    raise WritesStopped(self._failure)
                if lsn <= self._durable_lsn:
                    return
                if lsn > self._last_lsn:
                    raise ValueError(f"LSN {lsn} was never appended (the last is {self._last_lsn})")
                if not self._flushing:
                    break
                self._wait()
            self._flushing = True
            full = self._durable_lsn + self._last_batch_commits
            if self._last_batch_commits > 1 and self._last_lsn < full:
                # Committers woken by the last flush are about to append again: wait until
                # the batch is as large as the last (half a flush at most) so they share this
                # fsync instead of the next (`wal_gather`).
                seconds = min(self._last_flush_seconds / 2, MAX_SECONDS)
                self._gather.wait(self._lock, full, seconds)
            batch, self._pending, self._tail = self._pending, [], None
            target = self._last_lsn
            self._last_batch_commits = target - self._durable_lsn
        started = time.perf_counter()
        try:
            self._lead(batch, target)
        finally:
            self._last_flush_seconds = time.perf_counter() - started

    def when_durable(self, lsn: int, call: Callable[[], object]) -> bool:
        """Have `call()` (cheap, never blocking nor raising) made outside the log's lock by the
        thread whose flush makes record `lsn` durable, or that finds the log failed. False:
        nothing kept (`lsn` durable already, the log failed or closed), the caller calls it."""
        with self._lock:
            if lsn <= self._durable_lsn or self._failure is not None or self._closed:
                return False
            self._at_durable.append((lsn, call))
            return True

    def _due_locked(self) -> list[tuple[int, Callable[[], object]]]:
        """The `when_durable` calls due now, taken out: all once the log failed or the last
        added is durable (one added out of LSN order may come early: its reader waits)."""
        waiting, durable = self._at_durable, self._durable_lsn
        if self._failure is not None or waiting[-1][0] <= durable:
            self._at_durable = []
            return waiting
        self._at_durable = [entry for entry in waiting if entry[0] > durable]
        return [entry for entry in waiting if entry[0] <= durable]

    def _wait(self) -> None:
        """`Condition.wait` (the lock held), counted in `_waiting` meanwhile."""
        self._waiting += 1
        try:
            self._cond.wait()
        finally:
            self._waiting -= 1

    def _lead(self, batch: list[tuple[Segment, bytearray]], target: int) -> None:
        """Flushes `batch` (ending with record `target`) as the one leader, outside the lock."""
        failure: BaseException | None = None
        try:
            self._write_batch(batch)
        except BaseException as exc:  # whatever broke, waiters must not hang
            failure = exc
        with self._cond:
            self._flushing = False
            if failure is None:
                self._durable_lsn = target
            elif self._failure is None:
                self._failure = failure_message(self._doing, failure, self._durable_lsn)
            if self._waiting:  # the protocols' one flushing thread is most often alone
                self._cond.notify_all()
            message = self._failure
            due = self._due_locked() if self._at_durable else None
        if due:
            for _, call in due:
                call()
        if failure is not None:
            raise WritesStopped(message or str(failure)) from failure

    def _write_batch(self, batch: list[tuple[Segment, bytearray]]) -> None:
        """Writes each segment's part of `batch` in one call that returns once it is durable
        (`FileOps.write_synced`; where the system has none, a write and an fsync): the leader
        gives up and takes back the interpreter lock once a flush, not twice."""
        for segment, run in segment_runs(batch):
            if segment is not self._write_segment:
                self._switch_segment(segment)
            fd = self._write_fd
            assert fd is not None
            self._doing = f"write to {segment.path}"  # and sync it, in one call
            end = segment.written + sum(map(len, run))
            if self._zeros is not None:
                self._zeros.claim(end)  # the zeros ahead stay clear of this run
            if not (self._one_call and self._write_synced(fd, run)):
                for data in run:
                    write_all(self._files, fd, data)
                self._write_dirty = True
            for data in run:
                segment.crc = zlib.crc32(data, segment.crc)
            segment.written = end
        if self._write_dirty and self._write_fd is not None:
            self._doing = f"sync {self._write_segment.path if self._write_segment else ''}"
            self._timed(self._files.fsync, self._write_fd)
            self._write_dirty = False

    def _write_synced(self, fd: int, run: list[bytearray]) -> bool:
        """`run` written and durable; False, nothing written, if the system has no such call."""
        try:
            self._timed(write_all_synced, self._files, fd, run)
        except OSError as exc:
            if exc.errno not in UNSUPPORTED:
                raise
            self._one_call = False
            return False
        return True

    def _switch_segment(self, segment: Segment) -> None:
        if self._write_fd is not None:
            if self._write_dirty:
                # The old segment must be whole on disk before a later one exists: otherwise a
                # crash could leave a torn frame in a segment that is not the last.
                self._doing = f"sync {self._write_segment.path if self._write_segment else ''}"
                self._timed(self._files.fsync, self._write_fd)
                self._write_dirty = False
            self._doing = f"close {self._write_segment.path if self._write_segment else ''}"
            fd, self._write_fd, self._write_segment = self._write_fd, None, None
            self._files.close(fd)
        sealed, self._unsealed = self._unsealed, segment
        if sealed is not None and sealed is not segment:
            # It never changes again: appends go to this segment and later ones.
            write_seal(self._files, sealed.path, sealed.seal())
        self._doing = f"open {segment.path}"
        fd = self._write_fd = self._files.open(segment.path, _OPEN_FLAGS, 0o644)
        self._write_segment = segment
        self._files.seek(fd, segment.written)
        if self._zeros is not None:
            size = os.fstat(fd).st_size
            self._zeros.switch(segment.path, segment.written, size, self._segment_bytes)
        if not segment.on_disk:
            # A new file's name is durable only once the folder is synced; do it before any
            # record in it can be acknowledged.
            self._doing = f"sync the folder {self._directory}"
            self._timed(self._files.sync_directory, self._directory)
            segment.on_disk = True

    def _timed(self, sync: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> None:
        """`sync(*args)`: one fsync (or synchronized write) in the count and, once it
        returned, in the histogram. Both are written under the log's lock, taken once after
        the sync: every observer of the histogram is here, so it needs no lock of its own."""
        started = time.perf_counter()
        try:
            sync(*args, **kwargs)
            if self._fsync_delay > 0:
                time.sleep(self._fsync_delay)
        except BaseException:
            with self._lock:
                self._fsync_count += 1
            raise
        elapsed = time.perf_counter() - started
        with self._lock:
            self._fsync_count += 1
            self.fsync_seconds.observe_alone(elapsed)

    def _fail(self, doing: str, exc: BaseException) -> WritesStopped:
        with self._cond:
            if self._failure is None:
                self._failure = failure_message(doing, exc, self._durable_lsn)
            self._cond.notify_all()
            due, self._at_durable = self._at_durable, []
            message = self._failure
        for _, call in due:
            call()
        return WritesStopped(message)

    # --- reading ----------------------------------------------------------------------------

    def read(
        self, after_lsn: int, *, limit_records: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """(LSN, payload) of the records after `after_lsn`, in order, up to `durable_lsn` now.

        `after_lsn` 0 means from the oldest record kept. Raises `Gone` at once when records after
        `after_lsn` are no longer kept, and from the iterator when a segment it needs is removed
        before it is opened. The iterator opens its own file handles and holds no lock.
        """
        first, plan = self._plan(after_lsn, limit_records)
        return run_reads(plan, first, limit_records, lambda: self.oldest_lsn)

    def read_runs(self, after_lsn: int) -> Iterator[tuple[int, list[memoryview]]]:
        """The records `read` gives, in runs of consecutive ones: (LSN of the run's first,
        their payloads in order), checked as `read` checks them but for the checksums the
        open checked already (recovery reads right after it: each frame's checksum once,
        not twice). For a reader that takes many records at once (recovery's replay), at a
        loop step per record."""
        first, plan = self._plan(after_lsn, None)
        for step in plan:
            try:
                yield from frame_runs(step, first, self._checked_lsn)
            except OSError as exc:
                raise read_failure(step.path, exc) from exc

    def _plan(self, after_lsn: int, limit_records: int | None) -> tuple[int, list[ReadStep]]:
        """The first LSN a read after `after_lsn` gives, and each segment's share of it."""
        if after_lsn < 0:
            raise ValueError("after_lsn must be 0 or more")
        with self._lock:
            oldest = self._oldest_locked()
            first = oldest if after_lsn == 0 else after_lsn + 1
            if first < oldest:
                raise Gone(gone_message(oldest), gone_before=oldest)
            bound = self._durable_lsn
            plan: list[ReadStep] = []
            if first <= bound and limit_records != 0:
                i = bisect_right(self._segments, first, key=_first_lsn) - 1
                for segment in self._segments[i:]:
                    if segment.first_lsn > bound:
                        break
                    if segment.first_lsn <= first:
                        start_lsn, offset = segment.seek_hint(first)
                    else:
                        start_lsn, offset = segment.first_lsn, 0
                    end_lsn = min(segment.last_lsn, bound)
                    plan.append(ReadStep(segment.path, offset, start_lsn, end_lsn))
        return first, plan

    # --- retention and closing --------------------------------------------------------------

    def remove_through(self, lsn: int) -> int:
        """Deletes whole closed segments whose every record is <= `lsn`; returns bytes freed.

        The active (last) segment and anything not yet durable are always kept. Segments go
        oldest first, with a folder sync after each, so a crash never leaves a gap at the front.
        """
        with self._remove_lock:
            with self._lock:
                if self._failure is not None:
                    raise WritesStopped(self._failure)
                limit = min(lsn, self._durable_lsn)
                victims: list[Segment] = []
                while len(self._segments) > 1 and self._segments[0].last_lsn <= limit:
                    victims.append(self._segments.pop(0))
                    self._total_bytes -= victims[-1].size
            freed = 0
            for segment in victims:
                doing = f"remove {segment.path}"
                try:
                    remove_seal(self._files, segment.path)  # first: never a seal alone
                    try:
                        self._files.unlink(segment.path)
                    except FileNotFoundError:
                        pass
                    freed += segment.size
                    doing = f"sync the folder {self._directory}"
                    self._timed(self._files.sync_directory, self._directory)
                except OSError as exc:
                    raise self._fail(doing, exc) from exc
            return freed

    def close(self) -> None:
        """Flushes and fsyncs everything appended, then releases the file. Idempotent.

        Raises `WritesStopped` only if this final flush fails; a log that failed earlier closes
        quietly (its failure was already reported to every waiter).
        """
        with self._cond:
            if self._closing:
                while not self._closed:
                    self._wait()
                return
            self._closing = True
            last = self._last_lsn
            failed = self._failure is not None
        error: WritesStopped | None = None
        if not failed:
            try:
                self.wait_durable(last)
            except WritesStopped as exc:
                error = exc
        with self._cond:
            while self._flushing:
                self._wait()
        if self._zeros is not None:
            self._zeros.close()  # a step still writing ends first
        with self._cond:
            if self._write_fd is not None:
                fd, self._write_fd, self._write_segment = self._write_fd, None, None
                try:
                    self._files.close(fd)
                except OSError:
                    # Everything was fsync'd before (or the log had failed and acknowledged
                    # nothing since): a failing close loses nothing, and recovery reads the file.
                    pass
            if not failed and error is None and self._unsealed is not None:
                # What the last segment holds now, so that the next open need not walk it;
                # appends after that open make the seal a prefix, still worth its checksum.
                write_seal(self._files, self._unsealed.path, self._unsealed.seal())
            self._closed = True
            self._cond.notify_all()
        if error is not None:
            raise error

    def __enter__(self) -> WriteAheadLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"WriteAheadLog({str(self._directory)!r}, last_lsn={self._last_lsn},"
            f" durable_lsn={self._durable_lsn})"
        )


def _first_lsn(segment: Segment) -> int:
    return segment.first_lsn

"""Zeros written ahead of the log's end, so that a commit's synced write carries data only.

A synced write that grows a file also makes its new size durable: on ext4 a metadata write
(a journal commit where there is a journal) on top of the data's. A write into blocks that
are already allocated *and written* needs none. So, once the segment being written holds
`ZeroPlan.after` bytes, a background step writes zeros past the log's end, `chunk` bytes at
a time, and fsyncs them, whenever fewer than `ahead` bytes of written zeros are left: the
leader's later writes land in them (`tools/bench/log_sync.py`: a synced 100-500 byte write
into written zeros took 0.69-0.71x the time of one growing the file on this project's test
machine). Blocks only fallocate'd are not enough in general: a first write into such a block
changes the file's extents, which the sync must then commit, as growing does.

What callers may rely on:

- The zeros never land on a byte the leader wrote or is writing: the leader `claim`s the end
  of each run before writing it, and a zeroing step writes only from the claimed end on; a
  run that would reach into a step still writing waits for that step (the leader has then
  overtaken the zeros, which `after`, `chunk` and `ahead` make rare).
- Nothing is acknowledged on the zeros' account: they are not the log's, a segment's
  records end where its valid frames end (`wal_segments.scan_segments`: a zero tail is the
  end, not damage), and a crash in a step leaves zeros or a shorter file, both the end.
- At most `ahead + chunk` bytes past the log's end, and never past the segment's size
  (`limit`), are zeroed: the disk a log uses stays bounded.
- A failing step (a full disk, say) only ends the zeroing of that segment: writes then grow
  the file as without it. `close` waits for a running step.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from refimpl.engine.files import FileOps

__all__ = ["DEFAULT_ZERO_PLAN", "ZeroAhead", "ZeroPlan"]


@dataclass(frozen=True, slots=True)
class ZeroPlan:
    """When and how much a log zeroes ahead of its end (see the module docstring).

    `background`: each step on a thread of its own (a commit never waits for it); False runs
    it in the leader's thread after its write, which only tests want (the steps then come in
    a fixed order among the log's other file operations).
    """

    after: int = 64 * 1024  # a segment this full starts its zeroing: small logs never do
    chunk: int = 1 << 20  # bytes a step writes
    ahead: int = 512 * 1024  # a step starts when fewer written zeros than this are left
    background: bool = True


DEFAULT_ZERO_PLAN = ZeroPlan()
_ZEROS = bytes(1 << 20)  # what a step writes, a piece at a time


class ZeroAhead:
    """One log's zeroing ahead of its end: the leader's side (`switch`, `claim`) and the
    steps' (run in the background). Thread safe; `switch` and `claim` are the leader's."""

    def __init__(self, files: FileOps, plan: ZeroPlan) -> None:
        self._files = files
        self._plan = plan
        self._cond = threading.Condition(threading.Lock())
        self._path: Path | None = None  # the segment file being written
        self._limit = 0  # never zeroed past: the segment's size
        self._claimed = 0  # where the leader's writes end (the last run's included)
        self._zeroed = 0  # bytes of the file known written (records or zeros), fsync'd
        self._busy: tuple[Path, int] | None = None  # a running step: its file and first byte
        self._failed = False  # a step failed in this segment: no more in it
        self._closed = False

    def switch(self, path: Path, written: int, file_size: int, limit: int) -> None:
        """The leader writes `path` from `written` on; the file holds `file_size` bytes
        (zeros past `written`, when a step or an earlier process wrote them)."""
        with self._cond:
            self._path, self._claimed, self._limit = path, written, limit
            self._zeroed = max(written, file_size)
            self._failed = False

    def claim(self, end: int) -> None:
        """The leader is about to write up to byte `end` of its segment: waits for a step
        whose zeros would reach it, and starts a step when the zeros ahead run low."""
        plan = self._plan
        step: partial[None] | None = None
        with self._cond:
            while self._busy is not None and self._busy[0] == self._path and self._busy[1] < end:
                self._cond.wait()
            self._claimed = end
            start = max(self._zeroed, end)
            if (
                self._busy is None
                and not (self._failed or self._closed)
                and end >= plan.after
                and self._zeroed - end < plan.ahead
                and start < self._limit
                and self._path is not None
            ):
                path, stop = self._path, min(start + plan.chunk, self._limit)
                self._busy = (path, start)
                step = partial(self._step, path, start, stop)
        if step is None:
            return
        if not plan.background:
            step()  # its zeros start past this run's end: the run is written after it
            return
        try:
            threading.Thread(target=step, name="log zeros", daemon=True).start()
        except RuntimeError:  # no thread to be had: no zeros, and nothing waits for them
            self._ended(path, stop, done=False)

    def _step(self, path: Path, start: int, stop: int) -> None:
        """Zeros written into `path` from `start` to `stop`, fsync'd."""
        done = False
        try:
            fd = self._files.open(path, os.O_WRONLY)
            try:
                offset = start
                while offset < stop:
                    piece = memoryview(_ZEROS)[: min(len(_ZEROS), stop - offset)]
                    offset += self._files.write_at(fd, piece, offset)
                self._files.fsync(fd)
                done = True
            finally:
                self._files.close(fd)
        except OSError:
            pass  # the zeros are an economy: without them, writes grow the file
        finally:  # whatever happened, a run or a close waiting for this step goes on
            self._ended(path, stop, done)

    def _ended(self, path: Path, stop: int, done: bool) -> None:
        with self._cond:
            self._busy = None
            if self._path == path:
                if done:
                    self._zeroed = max(self._zeroed, stop)
                else:
                    self._failed = True
            self._cond.notify_all()

    def close(self) -> None:
        """No step after this; returns once a running one ended."""
        with self._cond:
            self._closed = True
            while self._busy is not None:
                self._cond.wait()

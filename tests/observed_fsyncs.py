"""A write-ahead log's files whose fsyncs are observed, for tests of durability: what was
on disk at each returned fsync, and an fsync that fails on purpose.

A synchronized write (`FileOps.write_synced`, the log's one call that writes and syncs) is
both: its bytes are written, and on disk once it returns; it is an fsync in the count, and
the `fail_at`-th fails before it writes anything. It is the real call, so the tests that use
these files prove durability on the path the server takes."""

from __future__ import annotations

from collections.abc import Sequence

from refimpl.engine.files import Buffer, FileOps, pwrite_synced


class ObservedFsyncs(FileOps):
    """A log's files whose fsyncs are seen: how many bytes of each file were on disk at
    the last fsync of it that returned; the `fail_at`-th fsync fails instead."""

    def __init__(self, fail_at: int | None) -> None:
        self.written: dict[int, int] = {}
        self.synced: dict[int, int] = {}
        self.fsyncs = 0
        self.synced_writes = 0  # how many of the fsyncs were synchronized writes
        self.fail_at = fail_at

    def wrote(self, fd: int, buffers: Sequence[Buffer], count: int) -> None:
        """`count` bytes, the first of `buffers`, went to `fd` (a subclass keeps them)."""
        self.written[fd] = self.written.get(fd, 0) + count

    def write(self, fd: int, data: Buffer) -> int:
        count = super().write(fd, data)
        self.wrote(fd, [data], count)
        return count

    def fsync(self, fd: int) -> None:
        self._fsync_begins()
        written = self.written.get(fd, 0)
        super().fsync(fd)
        self.synced[fd] = written

    def write_synced(self, fd: int, buffers: Sequence[Buffer]) -> int:
        self._fsync_begins()
        count = pwrite_synced(fd, buffers)  # the real one call: no write or fsync of ours
        self.synced_writes += 1
        self.wrote(fd, buffers, count)
        self.synced[fd] = self.written[fd]
        return count

    def _fsync_begins(self) -> None:
        self.fsyncs += 1
        if self.fsyncs == self.fail_at:
            raise OSError(5, "Input/output error")

    def durable_bytes(self) -> int:
        return max(self.synced.values(), default=0)

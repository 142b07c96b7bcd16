"""A write-ahead log's files whose fsyncs are observed, for tests of durability: what was
on disk at each returned fsync, and an fsync that fails on purpose."""

from __future__ import annotations

from refimpl.engine.files import FileOps


class ObservedFsyncs(FileOps):
    """A log's files whose fsyncs are seen: how many bytes of each file were on disk at
    the last fsync of it that returned; the `fail_at`-th fsync fails instead."""

    def __init__(self, fail_at: int | None) -> None:
        self.written: dict[int, int] = {}
        self.synced: dict[int, int] = {}
        self.fsyncs = 0
        self.fail_at = fail_at

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        count = super().write(fd, data)
        self.written[fd] = self.written.get(fd, 0) + count
        return count

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        if self.fsyncs == self.fail_at:
            raise OSError(5, "Input/output error")
        written = self.written.get(fd, 0)
        super().fsync(fd)
        self.synced[fd] = written

    def durable_bytes(self) -> int:
        return max(self.synced.values(), default=0)

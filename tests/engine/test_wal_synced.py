"""The log's flush by synchronized writes (`FileOps.write_synced`): one system call that
writes and syncs a flush, a short one continued, and the write and fsync where the system
has none or a test's files change either."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence
from pathlib import Path

import pytest

from refimpl.engine.files import Buffer, FileOps, pwrite_synced, write_all_synced
from refimpl.engine.storage.wal import WriteAheadLog
from tests.engine.wal_files import payload_of, segment_files


class CountedFiles(FileOps):
    """Real files that count their writes, fsyncs and synchronized writes; `short` cuts
    each synchronized write to that many bytes, `unsupported` refuses it as a kernel
    without RWF_DSYNC does."""

    def __init__(self, short: int | None = None, unsupported: bool = False) -> None:
        self.writes = self.fsyncs = self.synced = 0
        self.short = short
        self.unsupported = unsupported

    def write(self, fd: int, data: Buffer) -> int:
        self.writes += 1
        return super().write(fd, data)

    def fsync(self, fd: int) -> None:
        self.fsyncs += 1
        super().fsync(fd)

    def write_synced(self, fd: int, buffers: Sequence[Buffer]) -> int:
        self.synced += 1
        if self.unsupported:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        if self.short is not None:
            return pwrite_synced(fd, [memoryview(buffers[0])[: self.short]])
        return pwrite_synced(fd, buffers)


def _records(directory: Path) -> list[tuple[int, bytes]]:
    with WriteAheadLog(directory) as again:
        return list(again.read(0))


def test_a_flush_is_one_synchronized_write_and_no_fsync(tmp_path: Path) -> None:
    files = CountedFiles()
    with WriteAheadLog(tmp_path, files=files) as log:
        log.wait_durable(log.append(payload_of(1)))  # creates the segment: a folder sync
        before = (files.writes, files.fsyncs, files.synced, log.fsync_count)
        for lsn in range(2, 12):
            log.append(payload_of(lsn))
            if lsn % 2:
                log.wait_durable(lsn)  # two records a flush
        after = (files.writes, files.fsyncs, files.synced, log.fsync_count)
        # Each flush: one synchronized write, counted as the fsync it is; no write, no fsync.
        assert [b - a for a, b in zip(before, after, strict=True)] == [0, 0, 5, 5]
        assert log.durable_lsn == 11
    assert _records(tmp_path) == [(lsn, payload_of(lsn)) for lsn in range(1, 12)]


def test_a_short_synchronized_write_is_continued_until_every_byte_is_written(
    tmp_path: Path,
) -> None:
    files = CountedFiles(short=7)
    with WriteAheadLog(tmp_path, files=files) as log:
        for lsn in range(1, 4):
            log.append(payload_of(lsn))
        log.wait_durable(3)
        assert files.synced > 3  # 7 bytes a call
    assert _records(tmp_path) == [(lsn, payload_of(lsn)) for lsn in range(1, 4)]


def test_without_synchronized_writes_the_log_writes_and_fsyncs(tmp_path: Path) -> None:
    files = CountedFiles(unsupported=True)
    with WriteAheadLog(tmp_path, files=files) as log:
        for lsn in range(1, 6):
            log.wait_durable(log.append(payload_of(lsn)))
        assert files.synced == 1  # tried once, never again
        assert files.writes == 5 and files.fsyncs >= 5
    assert _records(tmp_path) == [(lsn, payload_of(lsn)) for lsn in range(1, 6)]


def test_a_new_segment_is_begun_after_the_last_one_is_durable(tmp_path: Path) -> None:
    # Segments of about two frames: one flush's batch spans several segment files, each
    # written in a synchronized write of its own before the next is opened.
    files = CountedFiles()
    with WriteAheadLog(tmp_path, segment_bytes=100, files=files) as log:
        for lsn in range(1, 8):
            log.append(payload_of(lsn))
        log.wait_durable(7)
        assert files.synced == len(segment_files(tmp_path)) == 4
    assert _records(tmp_path) == [(lsn, payload_of(lsn)) for lsn in range(1, 8)]


class FaultyFsync(FileOps):
    """Real files whose fsync fails: it changes `fsync` and not `write_synced`."""

    def fsync(self, fd: int) -> None:
        raise OSError(errno.EIO, "injected")


def test_files_that_change_fsync_see_a_synchronized_write_as_a_write_and_an_fsync(
    tmp_path: Path,
) -> None:
    # A test's fault or view of the disk holds for the log's flushes too.
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        with pytest.raises(OSError, match="injected"):
            write_all_synced(FaultyFsync(), fd, [b"ab", bytearray(b"cd")])
        assert (tmp_path / "f").read_bytes() == b"abcd"  # written first, as write() would
        write_all_synced(FileOps(), fd, [memoryview(b"ef"), b"", b"g"])
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"abcdefg"


def test_more_buffers_than_one_call_takes_are_written_in_several(tmp_path: Path) -> None:
    # A flush of many large records kept as they are has a buffer each: past IOV_MAX
    # (1,024 on Linux) one call refuses them (EINVAL), which would stop the log's writes.
    parts = [bytes([i % 251]) * 3 for i in range(2_500)]
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        write_all_synced(FileOps(), fd, parts)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == b"".join(parts)

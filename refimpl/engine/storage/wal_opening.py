"""Opening a write-ahead log's folder (`WriteAheadLog`'s recovery) and the words of its
failures.

`recover` reads the segments once (`wal_segments.scan_segments`, with their seals), cuts a
torn tail back, refuses damage, and makes what it accepts durable before the log builds on
it; a zero tail after the last valid frame (zeros written ahead, `wal_zeros`) is the log's
end and stays.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refimpl.engine.files import FileOps
from refimpl.engine.storage.wal_seals import write_seal
from refimpl.engine.storage.wal_segments import Segment, list_segments, scan_segments
from refimpl.errors import CorruptLog, WritesStopped

# The log's timer of one fsync: `timed(sync, *args)` runs `sync(*args)` and counts it.
Timed = Callable[..., None]


def recover(directory: Path, files: FileOps, timed: Timed) -> tuple[list[Segment], list[str]]:
    """The valid segments of the log in `directory` (created when missing), oldest first,
    and what recovery did that an operator should hear (a torn tail cut). Raises
    `CorruptLog` for damage, `WritesStopped` when a file cannot be read, cut or synced."""
    messages: list[str] = []
    doing = f"create the folder {directory}"
    try:
        if files.mkdir(directory):
            timed(files.sync_directory, directory.parent)
        doing = f"read the segments in {directory}"
        result = scan_segments(list_segments(directory), use_seals=True)
        if result.damage is not None:
            damage = result.damage
            raise CorruptLog(str(damage.path), damage.offset, damage.reason, damage.lost())
        if result.torn_tail is not None:
            tail = result.torn_tail
            doing = f"cut the torn tail of {tail.path}"
            files.truncate(tail.path, tail.offset)
            _sync_file(files, tail.path, timed)
            messages.append(f"cut a torn tail of {tail.where()}")
        elif result.segments:
            # The previous process may have died between write and fsync; what recovery
            # accepts as durable must be on disk before anything is built on it.
            doing = f"sync {result.segments[-1].path}"
            _sync_file(files, result.segments[-1].path, timed)
    except OSError as exc:
        raise WritesStopped(failure_message(doing, exc, durable_lsn=None)) from exc
    for segment in result.walked:  # sound, but unsealed: the next open need not walk it
        write_seal(files, segment.path, segment.seal())
    return result.segments, messages


def _sync_file(files: FileOps, path: Path, timed: Timed) -> None:
    fd = files.open(path, os.O_RDONLY)
    try:
        timed(files.fsync, fd)
    finally:
        files.close(fd)


def failure_message(doing: str, exc: BaseException, durable_lsn: Any) -> str:
    """Why the log stopped writing, for every waiter: what it could not do, the error, and
    the last acknowledged LSN (`durable_lsn`; None while opening, before any)."""
    acked = f"; nothing after LSN {durable_lsn} is acknowledged" if durable_lsn is not None else ""
    return (
        f"writes stopped: the write-ahead log could not {doing or 'go on'} ({exc}){acked};"
        " the disk must be checked and the server restarted to write again"
    )

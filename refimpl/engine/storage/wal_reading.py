"""Reading a write-ahead log's segment files along a plan (`WriteAheadLog.read`'s iterator).

A plan is the segments' shares of a read, each a `ReadStep`, made under the log's lock; this
module runs one without any lock, opening its own file handles, and words the errors a read
raises: a segment removed before it was opened is `Gone` (the reader resumes later or starts
over), a read error of the disk is a `StorageError`, never the consumer's own exceptions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from refimpl.engine.storage.wal_segments import ReadStep, read_frames
from refimpl.errors import Gone, StorageError

_READ_BUFFER = 64 * 1024


def run_reads(
    plan: list[ReadStep], first: int, limit: int | None, oldest_lsn: Callable[[], int]
) -> Iterator[tuple[int, bytes]]:
    """(LSN, payload) of the records of `plan` from LSN `first`, at most `limit` of them;
    `oldest_lsn()` names the oldest record kept when a segment is found removed."""
    remaining = limit
    for step in plan:
        try:
            file = open(step.path, "rb", buffering=_READ_BUFFER)
        except FileNotFoundError:
            oldest = oldest_lsn()
            raise Gone(
                f"the log up to LSN {step.end_lsn} was removed while being read; "
                + gone_message(oldest),
                gone_before=oldest,
            ) from None
        except OSError as exc:
            raise read_failure(step.path, exc) from exc
        # A read error is the disk's, not the reader's: it becomes a StorageError (503).
        # The consumer's own exceptions never reach this `except`: they stay outside.
        try:
            with file:
                for record in read_frames(file, step, first):
                    yield record
                    if remaining is not None:
                        remaining -= 1
                        if remaining <= 0:
                            return
        except OSError as exc:
            raise read_failure(step.path, exc) from exc


def read_failure(path: Path, exc: OSError) -> StorageError:
    """The error of a segment file that cannot be read."""
    return StorageError(
        f"the write-ahead log file {path} cannot be read ({exc}); the disk must be checked"
    )


def gone_message(oldest: int) -> str:
    """What a reader of records older than `oldest` is told, and how to go on."""
    return (
        f"the log before LSN {oldest} is no longer kept; resume from LSN {oldest - 1} or later,"
        " or start over from a snapshot"
    )

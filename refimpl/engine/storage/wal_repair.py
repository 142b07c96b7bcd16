"""The operator's view of a log: what `refimpl check` reports, and cutting damage aside.

`inspect_log` reads a log folder and says what opening it would do (nothing, cut a torn tail,
or refuse damage), changing no file. `cut_damaged_log` is the documented way past damage: it
moves every byte from the damaged frame on (the rest of that segment, and every later
segment) into a folder beside the log, keeping them for a closer look, so that the log ends
with the last intact record before the damage. Both use `scan_segments`, the one place that
tells a torn tail from damage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from refimpl.engine.files import REAL_FILES, FileOps, write_all
from refimpl.engine.storage.wal_seals import remove_seal
from refimpl.engine.storage.wal_segments import (
    Damage,
    SegmentInfo,
    list_segments,
    scan_segments,
)

__all__ = ["LogReport", "cut_damaged_log", "inspect_log"]


@dataclass(frozen=True, slots=True)
class LogReport:
    """What `inspect_log` found. `segments` hold the sizes of their valid frames."""

    directory: Path
    segments: tuple[SegmentInfo, ...]
    records: int
    first_lsn: int | None  # None when no record is kept
    last_lsn: int | None
    torn_tail: str | None  # a sentence; opening the log would cut it back
    damage: Damage | None  # opening the log would refuse to start

    @property
    def ok(self) -> bool:
        """True when opening the log would succeed (a torn tail is cut back, not damage)."""
        return self.damage is None

    def sentences(self) -> list[str]:
        """The report as sentences for a person, the summary first."""
        if self.records:
            span = f"LSN {self.first_lsn} to {self.last_lsn}"
        else:
            span = "no record"
        lines = [
            f"{self.directory}: {len(self.segments)} segment(s), {self.records} record(s), {span}"
        ]
        if self.torn_tail:
            lines.append(self.torn_tail)
        if self.damage is not None:
            d = self.damage
            lines.append(
                f"damage in {d.path} at offset {d.offset}: {d.reason}; {d.lost()} would be lost"
                " by cutting it aside (`refimpl check --cut-damaged-log`)"
            )
        return lines


def inspect_log(directory: Path, on_read: Callable[[int], None] | None = None) -> LogReport:
    """Reads and validates the log in `directory` without changing any file; `on_read`
    hears the bytes of each segment as it is read."""
    directory = Path(directory)
    if not directory.is_dir():
        return LogReport(directory, (), 0, None, None, None, None)
    result = scan_segments(list_segments(directory), on_read=on_read)
    segments = tuple(segment.info() for segment in result.segments)
    records = result.records
    first_lsn = last_lsn = None
    if records:
        first_lsn = result.segments[0].first_lsn  # only the last segment can be empty
        last_lsn = result.segments[-1].last_lsn
    torn = None
    if result.torn_tail is not None:
        torn = f"a torn tail of {result.torn_tail.where()}; opening the log cuts it back"
    return LogReport(directory, segments, records, first_lsn, last_lsn, torn, result.damage)


def cut_damaged_log(directory: Path, aside: Path, files: FileOps = REAL_FILES) -> Damage | None:
    """Moves the damaged end of the log in `directory` into the folder `aside`.

    The damaged segment keeps its bytes before the damage; the bytes from the damage on go to
    `aside/<segment name>.from-<offset>`, and every later segment is moved into `aside` whole.
    Each step is durable before the next, so a crash in the middle leaves either the damage
    (run it again) or the cut log. Returns what was cut, or None when the log has no damage.
    """
    listing = list_segments(directory)
    damage = scan_segments(listing).damage
    if damage is None:
        return None
    files.mkdir(aside)
    files.sync_directory(aside.parent)
    data = damage.path.read_bytes()
    kept = aside / f"{damage.path.name}.from-{damage.offset}"
    fd = files.open(kept, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(files, fd, data[damage.offset :])
        files.fsync(fd)
    finally:
        files.close(fd)
    files.sync_directory(aside)
    for _first_lsn, path in listing:
        if path.name >= damage.path.name:
            remove_seal(files, path)  # the seal of a segment that changes or goes
        if path.name > damage.path.name:
            files.replace(path, aside / path.name)
    files.sync_directory(aside)
    files.sync_directory(directory)  # later segments gone before the cut: no gap on a crash
    files.truncate(damage.path, damage.offset)
    fd = files.open(damage.path, os.O_RDONLY)
    try:
        files.fsync(fd)
    finally:
        files.close(fd)
    return damage

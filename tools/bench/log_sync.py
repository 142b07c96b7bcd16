"""A commit's synced append on this machine's disk: growing a file against writing into one
whose blocks are already written, and into one only fallocate'd.

Each mode writes `--appends` records of `--min-bytes` to `--max-bytes` (a one-row commit's
frame is 100-500 bytes) one after another, each durable before the next as the log makes
it (`pwritev2(..., RWF_DSYNC)`, or with `--fdatasync` a write and an fdatasync), and times
each call:

- `grow`: appended at the end of a new file (O_APPEND), as the log does today: each sync
  also commits the file's new size (on ext4 a journal commit);
- `zeroed`: written at its offset into a file already written with zeros and fsync'd (file
  and folder) before the timing: the sync carries data only, as PostgreSQL's pre-zeroed
  WAL segments make it;
- `fallocate`: written at its offset into a file given its blocks by `posix_fallocate` and
  fsync'd, never written: ext4 keeps such blocks as unwritten extents, and the first write
  into each turns it written, a metadata change that the sync commits as growing does.

With `--log`, the same through the engine's log (`WriteAheadLog`: a record appended, then
waited for until durable), `log grow` with no zeros written ahead against `log zeros` as the
log runs by default, each after a warm-up of 100 KB (past the size from which the zeros start).

The modes take turns of `--turn` writes each, in files of their own, `--rounds` times; every
round prints each mode's median and p99 in microseconds, and the end their medians over the
rounds. Run it under `nice`; other writers on the same disk move the figures, which is why
the modes take short turns:

    python tools/bench/log_sync.py [--appends 2000] [--rounds 5] [--folder DIR]
"""

from __future__ import annotations

import bench_path  # noqa: F401  - first: the checkout's refimpl (see bench_path)

# isort: split

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from refimpl.engine.files import REAL_FILES
from refimpl.engine.storage.wal import WriteAheadLog

_DSYNC = getattr(os, "RWF_DSYNC", 0)
MODES = ("grow", "zeroed", "fallocate")
LOG_MODES = ("log grow", "log zeros")


def _sizes(appends: int, low: int, high: int, seed: int) -> list[int]:
    chooser = random.Random(seed)
    return [chooser.randint(low, high) for _ in range(appends)]


def _prepare(path: Path, mode: str, total: int) -> int:
    """The file `mode` writes into, made ready (and durable) before any timing; its fd."""
    if mode == "grow":
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        if mode == "zeroed":
            chunk = bytes(1 << 20)
            written = 0
            while written < total:
                written += os.pwrite(fd, chunk[: min(len(chunk), total - written)], written)
        else:
            os.posix_fallocate(fd, 0, total)
        os.fsync(fd)
    REAL_FILES.sync_directory(path.parent)
    return fd


class Writer:
    """One mode's file, made ready (and durable) before any timing, and its synced writes."""

    def __init__(self, folder: Path, mode: str, total: int, fdatasync: bool) -> None:
        self.mode = mode
        self.path = folder / f"{mode}.bin"
        self.fd = _prepare(self.path, mode, total)
        self.offset = 0
        self.timings: list[float] = []
        self._fdatasync = fdatasync

    def write(self, payloads: list[bytes]) -> None:
        """Each of `payloads` written after the last, durable before the next; each timed."""
        fd, clock, timings, offset = self.fd, time.perf_counter, self.timings, self.offset
        grow, fdatasync = self.mode == "grow", self._fdatasync
        for data in payloads:
            started = clock()
            if fdatasync:
                written = os.write(fd, data) if grow else os.pwrite(fd, data, offset)
                os.fdatasync(fd)
            else:
                written = os.pwritev(fd, [data], -1 if grow else offset, _DSYNC)
            timings.append(clock() - started)
            assert written == len(data)
            offset += written
        self.offset = offset

    def close(self) -> None:
        os.close(self.fd)
        self.path.unlink()


class LogWriter:
    """`Writer` through the engine's log: each record appended and waited for until durable
    (`WriteAheadLog.append`, `wait_durable`), with or without its zeros written ahead."""

    def __init__(self, folder: Path, mode: str) -> None:
        self.mode = mode
        directory = folder / mode.replace(" ", "-")
        if mode == "log zeros":
            self.log = WriteAheadLog(directory)
        else:
            self.log = WriteAheadLog(directory, zeros=None)
        self.timings: list[float] = []
        self.write([bytes(1000)] * 100)  # past the size from which the zeros start
        time.sleep(0.5)  # and their first step done
        self.timings.clear()

    def write(self, payloads: list[bytes]) -> None:
        log, clock, timings = self.log, time.perf_counter, self.timings
        for data in payloads:
            started = clock()
            log.wait_durable(log.append(data))
            timings.append(clock() - started)

    def close(self) -> None:
        self.log.close()


def run_round(
    folder: Path, sizes: list[int], fdatasync: bool, turn: int, modes: tuple[str, ...] = MODES
) -> dict[str, list[float]]:
    """Seconds each synced write of `sizes` took in each mode, each mode in a new file of
    `folder`; the modes take turns every `turn` writes, so that whatever else the disk does
    meanwhile falls on each alike."""
    total = sum(sizes) + 4096
    writers: list[Writer | LogWriter] = [
        LogWriter(folder, mode) if mode in LOG_MODES else Writer(folder, mode, total, fdatasync)
        for mode in modes
    ]
    payloads = [os.urandom(size) for size in sizes]
    try:
        for k, start in enumerate(range(0, len(payloads), turn)):
            part = payloads[start : start + turn]
            for writer in writers if k % 2 == 0 else writers[::-1]:
                writer.write(part)
    finally:
        for writer in writers:
            writer.close()
    return {writer.mode: writer.timings for writer in writers}


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--min-bytes", type=int, default=100)
    parser.add_argument("--max-bytes", type=int, default=500)
    parser.add_argument("--turn", type=int, default=50, help="writes a mode's turn")
    parser.add_argument("--fdatasync", action="store_true", help="write, then fdatasync")
    parser.add_argument("--folder", type=Path, default=None, help="on the disk to measure")
    parser.add_argument("--log", action="store_true", help="through the engine's log instead")
    args = parser.parse_args()
    modes = LOG_MODES if args.log else MODES
    if not _DSYNC and not args.fdatasync:
        parser.error("no pwritev2 with RWF_DSYNC here: use --fdatasync")
    medians: dict[str, list[float]] = {mode: [] for mode in modes}
    p99s: dict[str, list[float]] = {mode: [] for mode in modes}
    with tempfile.TemporaryDirectory(dir=args.folder) as name:
        folder = Path(name)
        for round_ in range(args.rounds):
            sizes = _sizes(args.appends, args.min_bytes, args.max_bytes, seed=round_)
            timed = run_round(folder, sizes, args.fdatasync, args.turn, modes)
            line = []
            for mode in modes:
                timings = timed[mode]
                medians[mode].append(statistics.median(timings) * 1e6)
                p99s[mode].append(_p99(timings) * 1e6)
                line.append(f"{mode} p50 {medians[mode][-1]:7.1f} p99 {p99s[mode][-1]:8.1f}")
            print(f"round {round_ + 1}: " + " | ".join(line), flush=True)
    call = "write + fdatasync" if args.fdatasync else "pwritev2(RWF_DSYNC)"
    if args.log:
        call = "the log's append and wait_durable"
    print(f"\n{args.appends} synced appends of {args.min_bytes}-{args.max_bytes} bytes ({call}),")
    print(f"medians over {args.rounds} rounds, microseconds a call:")
    grow = statistics.median(medians[modes[0]])
    for mode in modes:
        p50 = statistics.median(medians[mode])
        p99 = statistics.median(p99s[mode])
        print(f"  {mode:10s} p50 {p50:8.1f}  p99 {p99:8.1f}  p50 vs grow {p50 / grow:5.2f}x")


if __name__ == "__main__":
    main()

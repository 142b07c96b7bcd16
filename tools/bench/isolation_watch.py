"""Watching the server of `isolation.py` while a phase runs: every thread's stack when
`/health` stalls, and who holds the interpreter lock.

- `StallWatch`: a thread asks `GET /health` every 0.25 s on a connection of its own, and
  another follows `/stream/changes` of the victim's `ticks` (a commit every 50 ms while the
  victim writes); when an answer is later than `seconds`, or no event came for that long,
  `py-spy dump` of the server (every thread's stack at that moment) is written to a file,
  at most `most` of them a run; every stall's length and file are printed at the end.
- `GilProfile`: `py-spy record --gil --nonblocking` of the server for the phase, in py-spy's
  raw format (one line a stack and its count); the samples are summed by thread (names
  without their numbers) and by the innermost module of ours in the stack, as shares of
  the phase's samples: who holds the interpreter lock, and in which module of ours.

Both need `py-spy` on the PATH (and the right to trace the server's process); without it
they say so and do nothing else.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import harness
import requests

PROBE_EVERY = 0.25
DUMP_TIMEOUT = 60.0


def _py_spy() -> str | None:
    found = shutil.which("py-spy")
    if found is None:
        print("        (py-spy is not on the PATH: no dumps, no profile)", file=sys.stderr)
    return found


class StallWatch:
    """`/health` every PROBE_EVERY s and the events of `ticks` (followed with `token` for
    `events_for` seconds: while the victim commits); a `py-spy dump` of `pid` into `folder`
    when an answer is `seconds` late or no event came for that long (at most `most` dumps).
    A context manager: its threads run inside."""

    def __init__(
        self,
        url: str,
        token: str,
        pid: int,
        seconds: float,
        folder: Path,
        events_for: float,
        most: int = 3,
    ) -> None:
        self._url = url
        self._token = token
        self._events_until = time.monotonic() + events_for
        self._last_event = 0.0  # time.monotonic() of the latest event of `ticks`; 0: none
        self._event_dumped = 0.0  # the `last_event` of the last dump for a gap of events
        self._pid = pid
        self._seconds = seconds
        self._folder = folder
        self._most = most
        self._stop = threading.Event()
        self._asked_at = 0.0  # time.monotonic() of the answer awaited now; 0: none
        self._dumped_at = 0.0  # the `asked_at` of the last dump: one dump a stall
        self.stalls: list[tuple[float, float, str]] = []  # (since start, seconds, dump file)
        self._dumps: dict[float, str] = {}
        self._began = time.monotonic()
        self._threads = [
            threading.Thread(target=self._probe, daemon=True),
            threading.Thread(target=self._follow, daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]
        self._spy = _py_spy()

    def __enter__(self) -> StallWatch:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(DUMP_TIMEOUT + 30)

    def _probe(self) -> None:
        http = harness.LeanHTTP(self._url)
        while not self._stop.is_set():
            self._asked_at = asked = time.monotonic()
            try:
                http.request("GET", "/health")
            except OSError as error:
                print(f"        stall watch: /health failed: {error!r}", file=sys.stderr)
            took = time.monotonic() - asked
            self._asked_at = 0.0
            if took > self._seconds:
                self.stalls.append((asked - self._began, took, self._dumps.get(asked, "")))
            self._stop.wait(PROBE_EVERY)

    def _follow(self) -> None:
        """The events of `ticks` while the victim commits: the time of the latest one, and
        each gap over `seconds` among the stalls."""
        headers = {"Authorization": f"Bearer {self._token}"}
        while not self._stop.is_set() and time.monotonic() < self._events_until:
            try:
                with requests.get(
                    f"{self._url}/stream/changes?db=demo&table=ticks",
                    headers=headers,
                    stream=True,
                    timeout=(10, 1.0),
                ) as response:
                    for chunk in response.iter_content(chunk_size=None):
                        if b"event: change" in chunk:
                            now = time.monotonic()
                            gap = now - self._last_event if self._last_event else 0.0
                            if gap > self._seconds:
                                at = self._last_event - self._began
                                path = self._dumps.get(self._last_event, "")
                                self.stalls.append((at, gap, f"no event; {path}"))
                            self._last_event = now
                        if self._stop.is_set() or time.monotonic() > self._events_until:
                            return
            except requests.RequestException:
                pass  # a read timeout between events (the phase ended, or a stall): again

    def _watch(self) -> None:
        while not self._stop.wait(0.1):
            now = time.monotonic()
            asked, last = self._asked_at, self._last_event
            if len(self._dumps) >= self._most:
                continue
            if asked and now - asked > self._seconds and asked != self._dumped_at:
                self._dumped_at = asked
                self._dump(asked, "/health stalled")
            elif (
                last
                and now < self._events_until
                and now - last > self._seconds
                and last != self._event_dumped
            ):
                self._event_dumped = last
                self._dump(last, "no event of ticks")

    def _dump(self, key: float, what: str) -> None:
        """`py-spy dump` of the server into the next file, kept under `key` (the stall's)."""
        if self._spy is None:
            return
        path = self._folder / f"isolation-stall-{len(self._dumps) + 1}.txt"
        at = time.monotonic() - self._began
        print(f"        {what} {at:.1f} s in: py-spy dump to {path}", file=sys.stderr)
        with path.open("w") as out:
            subprocess.run(
                [self._spy, "dump", "--pid", str(self._pid)],
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=DUMP_TIMEOUT,
                check=False,
            )
        self._dumps[key] = str(path)

    def report(self) -> None:
        """Every stall over `seconds`: when, how long, its dump."""
        if not self.stalls:
            print(f"stall watch: no /health answer or gap of events over {self._seconds:g} s\n")
            return
        print(f"stall watch: {len(self.stalls)} /health answers or gaps over {self._seconds:g} s")
        for at, took, path in sorted(self.stalls):
            print(f"  at {at:7.1f} s: {took:6.1f} s{f'  ({path})' if path else ''}")
        print()


# A frame of ours in a stack: its module's path. A stack's innermost one names its work.
OUR_FRAME = re.compile(r"\((refimpl/[^)]*?)\.py(?::\d+)?\)")


class GilProfile:
    """`py-spy record --gil` of `pid` for `seconds` into `path` (raw), summed by `report`."""

    RATE = 50  # samples a second: little enough to leave the machine to the benchmark

    def __init__(self, pid: int, seconds: float, path: Path) -> None:
        self._path = path
        self._seconds = seconds
        self._process: subprocess.Popen[bytes] | None = None
        spy = _py_spy()
        if spy is not None:
            self._process = subprocess.Popen(
                [spy, "record", "--pid", str(pid), "--gil", "--nonblocking", "--threads"]
                + ["--rate", str(self.RATE), "--duration", str(int(seconds))]
                + ["--format", "raw", "--output", str(path)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )

    def finish(self) -> None:
        if self._process is not None:
            try:
                self._process.wait(self._seconds + 60)
            except subprocess.TimeoutExpired:
                self._process.terminate()
                self._process.wait(30)

    def report(self, top: int = 12) -> None:
        """Shares of the phase's samples in which a thread held the interpreter lock."""
        if self._process is None or not self._path.exists():
            return
        threads: Counter[str] = Counter()
        works: Counter[str] = Counter()
        for line in self._path.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit():
                continue
            frames = stack.split(";")
            threads[re.sub(r"0x[0-9a-fA-F]+|\d+", "N", frames[0])] += int(count)
            ours = [m.group(1) for f in frames if (m := OUR_FRAME.search(f))]
            works[ours[-1] if ours else "(not ours)"] += int(count)
        total = self.RATE * self._seconds
        held = sum(threads.values())
        print(f"interpreter lock held in {held / total:.0%} of the samples ({self._path})")
        harness.print_table(
            ["thread (lock held)", "share"],
            [(name, f"{n / total:.1%}") for name, n in threads.most_common(top)],
        )
        harness.print_table(
            ["work (lock held)", "share"],
            [(name, f"{n / total:.1%}") for name, n in works.most_common(top)],
        )

"""Figure 5 of tools/bench/stream.py: single-row commit throughput with the event streams open
against none, the writers of every phase, and `--throughput-only`'s run and report.

One pair of phases (none open, then the streams open) says little on a 2-core machine: single
runs of one pair spread from 0.49 to 0.92 (a collection, a checkpoint, another program's
burst lands in one phase of the two). `throughput_run` so measures `pairs` pairs in one run,
after a warm-up: none open, then the streams opened (new readers each time), measured and
closed, and none open again at the end; pair k's ratio is its open phase over the mean of the
none phases before and after it (none_k, none_k+1), and the figure is the median of the
pairs' ratios, printed with each pair's and the spread. Each phase is measured twice in a
row: as the machine schedules it, and with the readers off the server's core (the target's).
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
from stream_readers import WRITER_BLOCK, Readers, exactly_once, readers_off_server
from stream_timing import threads_schedstat

PHASE_IDS = 10_000_000  # phase k's writers commit ids from (k + 1) * this on
WARM_UP_SECONDS = 2.0  # commits before the first phase, measured by none
CLOSED_WAIT_SECONDS = 30.0  # at most, for the server to see every closed stream gone


def writer(target: dict[str, Any]) -> Callable[[int], float]:
    """A client that commits one row `(ident, sent)` a call; gives `sent` (its clock)."""
    if target["kind"] == "refimpl":
        client = harness.LeanHTTP(
            target["url"],
            {"Authorization": f"Bearer {target['token']}", "Content-Type": "text/plain"},
        )

        def commit(ident: int) -> float:
            sent = time.monotonic()
            status, _, body = client.request(
                "POST", "/exec", f"INSERT INTO c VALUES ({ident}, {sent!r})".encode()
            )
            if status != 200:
                raise RuntimeError(f"the commit failed with {status}: {body[:200]!r}")
            return sent

        return commit
    import psycopg

    connection = psycopg.connect(target["conninfo"], autocommit=True)

    def commit_pg(ident: int) -> float:
        sent = time.monotonic()
        connection.execute("INSERT INTO c VALUES (%s, %s)", (ident, sent))
        return sent

    return commit_pg


class Throughput:
    """Single-row commits a second of `writers` writers, each one at a time; the ids they
    committed (writer n: `first_id + n * WRITER_BLOCK` on), the window and their latencies."""

    def __init__(
        self, target: dict[str, Any], first_id: int, seconds: float, writers: int = 4
    ) -> None:
        counts = [0] * writers
        latencies: list[list[float]] = [[] for _ in range(writers)]
        self.began = time.monotonic()
        stop = self.began + seconds

        def work(n: int) -> None:
            commit = writer(target)
            ident = first_id + n * WRITER_BLOCK
            while time.monotonic() < stop:
                sent = commit(ident)
                latencies[n].append((time.monotonic() - sent) * 1000)
                ident += 1
                counts[n] += 1

        threads = [threading.Thread(target=work, args=(n,)) for n in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self.ended = time.monotonic()
        self.rate = sum(counts) / seconds
        self.committed = [
            range(first_id + n * WRITER_BLOCK, first_id + n * WRITER_BLOCK + c)
            for n, c in enumerate(counts)
        ]
        self.latency = harness.summary([lat for one in latencies for lat in one])


def processes_cpu(pids: list[int]) -> float:
    """CPU seconds of the processes still running (PostgreSQL's come and go)."""
    total = 0.0
    for pid in pids:
        try:
            total += harness.cpu_seconds(pid)
        except OSError:
            pass
    return total


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and all its children, the ended ones included (PostgreSQL's
    backends come and go; a parent that waited for a child holds its time)."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    # utime, stime, cutime, cstime: fields 14 to 17 (fields[0] is field 3).
    total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return total + processes_cpu([int(c) for c in children])


def throughput_phase(
    target: dict[str, Any],
    pids: Callable[[], list[int]],
    readers: Readers | None,
    first_id: int,
    seconds: float,
    pinned: bool,
) -> dict[str, Any]:
    """Throughput with the streams open (`readers`) or none; the CPU the server and the
    readers took meanwhile (the readers share the machine's cores with the writers unless
    `pinned`) and the server's threads' schedstat before and after."""
    server_pids = pids()
    reader_pids = [] if readers is None else readers.pids
    readers_cpu, server_cpu = processes_cpu(reader_pids), tree_cpu(server_pids[0])
    threads = threads_schedstat(server_pids[0])
    if pinned:
        with readers_off_server(server_pids, reader_pids):
            done = Throughput(target, first_id, seconds)
    else:
        done = Throughput(target, first_id, seconds)
    elapsed = done.ended - done.began
    return {
        "run": done,
        "readers_pct": (processes_cpu(reader_pids) - readers_cpu) / elapsed * 100,
        "server_pct": (tree_cpu(server_pids[0]) - server_cpu) / elapsed * 100,
        "threads": (threads, threads_schedstat(server_pids[0])),
    }


def open_ratio(result: dict[str, Any], prefix: str) -> float:
    """Commits a second with the streams open over the mean of none open before and after."""
    none = (result[prefix + "none"]["run"].rate + result[prefix + "none_after"]["run"].rate) / 2
    return float(result[prefix + "open"]["run"].rate / none)


def streams_gone(target: dict[str, Any]) -> None:
    """Wait (CLOSED_WAIT_SECONDS at most) until the server counts no open stream: the readers'
    sockets closed, it ends each stream at its hang-up, which would cost the next phase."""
    client = harness.LeanHTTP(target["url"], {"Authorization": f"Bearer {target['token']}"})
    deadline = time.monotonic() + CLOSED_WAIT_SECONDS
    try:
        while time.monotonic() < deadline:
            status, _, body = client.request("GET", "/metrics")
            lines = body.decode().splitlines() if status == 200 else []
            if any(_gauge(line, "kdb_open_streams") == 0 for line in lines):
                return
            time.sleep(0.2)
    finally:
        client.close()


def _gauge(line: str, name: str) -> float | None:
    """The value of the metrics line `line` when it is the unlabelled gauge `name`."""
    fields = line.split()
    return float(fields[1]) if len(fields) == 2 and fields[0] == name else None


def throughput_run(
    target: dict[str, Any],
    pids: Callable[[], list[int]],
    streams: int,
    seconds: float,
    pairs: int,
) -> dict[str, Any]:
    """Figure 5 alone, `pairs` pairs (see the module docstring): by pair, its phases (the
    keys of `open_ratio`, pinned ones prefixed `pinned_`) and ratios; the phases of the pair
    whose pinned ratio is the median under the run's own keys (for the timing tables)."""
    Throughput(target, PHASE_IDS // 2, WARM_UP_SECONDS)  # the log's and the caches' first use
    phase_ids = iter(range(PHASE_IDS, PHASE_IDS * (4 * pairs + 3), PHASE_IDS))

    def none_open() -> dict[str, Any]:
        return {
            "none": throughput_phase(target, pids, None, next(phase_ids), seconds, False),
            "pinned_none": throughput_phase(target, pids, None, next(phase_ids), seconds, True),
        }

    nones = [none_open()]
    opens, checks = [], []
    for _ in range(pairs):
        readers = Readers(target, streams)
        readers.wait_ready()
        readers.timed(False)
        time.sleep(2.0)
        opened = {
            "open": throughput_phase(target, pids, readers, next(phase_ids), seconds, False),
            "pinned_open": throughput_phase(target, pids, readers, next(phase_ids), seconds, True),
        }
        committed = [*opened["open"]["run"].committed, *opened["pinned_open"]["run"].committed]
        _, tallies = readers.results(sum(len(ids) for ids in committed))
        checks.append(exactly_once(tallies, committed))
        streams_gone(target)
        opens.append(opened)
        nones.append(none_open())
    out: dict[str, Any] = {"pairs": pair_up(nones, opens)}
    out.update(median_pair(out["pairs"]))
    failed = [check for check in checks if check != "yes"]
    out["exactly_once"] = failed[0] if failed else "yes"
    return out


def pair_up(nones: list[dict[str, Any]], opens: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pair k: none_k's phases, open_k's, none_k+1's as `none_after` and `pinned_none_after`,
    and its ratios (`open_ratio`; pinned: `pinned_ratio`). `nones` has one more than `opens`."""
    pairs = []
    for k, opened in enumerate(opens):
        pair = {**nones[k], **opened}
        pair["none_after"] = nones[k + 1]["none"]
        pair["pinned_none_after"] = nones[k + 1]["pinned_none"]
        pair["ratio"], pair["pinned_ratio"] = open_ratio(pair, ""), open_ratio(pair, "pinned_")
        pairs.append(pair)
    return pairs


def median_pair(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """The pair whose pinned ratio is the median (of an even count, the lower middle one)."""
    by_ratio = sorted(pairs, key=lambda pair: pair["pinned_ratio"])
    return by_ratio[(len(by_ratio) - 1) // 2]


def _medians(pairs: list[dict[str, Any]], phase: str) -> tuple[float, float, float]:
    """Of `phase` over the pairs: the median commits a second, server CPU ms per commit and
    readers' CPU % of a core."""
    rates = [pair[phase]["run"].rate for pair in pairs]
    cpus = [pair[phase]["server_pct"] * 10 / max(pair[phase]["run"].rate, 1e-9) for pair in pairs]
    readers = [pair[phase]["readers_pct"] for pair in pairs]
    return statistics.median(rates), statistics.median(cpus), statistics.median(readers)


def throughput_report(
    ours: dict[str, Any],
    streams: int,
    ended: tuple[float, float, float],
    load: tuple[float, float, float],
    code: Path | None,
) -> None:
    """What `--throughput-only` prints: by phase, the medians over the pairs of commits a
    second and the server's CPU per commit, the median of the pairs' ratios, each pair's and
    their spread, and the readers' CPU with the streams open."""
    pairs = ours["pairs"]
    rows = []
    for prefix, label in [("", ""), ("pinned_", "readers off the server's core: ")]:
        for phase, title in [("none", "none open"), ("open", "all open"), ("none_after", "after")]:
            rate, cpu, _ = _medians(pairs, prefix + phase)
            rows.append(
                [f"{label}{title}: commits/s; server CPU ms per commit", f"{rate:.0f}; {cpu:.3f}"]
            )
        ratios = [pair[prefix + "ratio"] for pair in pairs]
        rows.append([f"{label}ratio all open / none", f"{statistics.median(ratios):.3f}"])
        rows.append(
            [
                f"{label}ratio by pair, in order; spread (max - min)",
                f"{', '.join(f'{r:.3f}' for r in ratios)}; {max(ratios) - min(ratios):.3f}",
            ]
        )
        rate, _, readers_pct = _medians(pairs, prefix + "open")
        events = max(rate, 1e-9) * streams  # a second
        rows.append(
            [
                f"{label}all open: readers' CPU % of a core; us per event",
                f"{readers_pct:.0f}; {readers_pct * 1e4 / events:.2f}",
            ]
        )
    rows.append(["every stream got every event once, in order", ours["exactly_once"]])
    harness.print_table(
        ["figure", "refimpl"],
        rows,
        f"{streams} streams; medians of {len(pairs)} pairs (none open, all open), none open"
        f" before and after each; load average {load[0]:.1f} at the start, {ended[0]:.1f} at"
        f" the end; refimpl of {code or 'this checkout'}",
    )
    # Issue 37's figure: the readers (and writers) off the server's core, the pairs' median.
    pinned = statistics.median(pair["pinned_ratio"] for pair in pairs)
    harness.print_checks(
        [
            harness.Check(
                f"commits/s, {streams} streams open / none, readers off the server's core"
                f" (median of {len(pairs)} pairs)",
                pinned,
                ">= 0.9",
                pinned >= 0.9,
            )
        ]
    )

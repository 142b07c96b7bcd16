"""The crash run of the crash tests (test_crash.py) and of tools/crash_soak.py: a fork server
of writers (`crash_child.py`), a run that kills, tears, reopens and verifies again and again
on one data folder, and its statistics. test_crash.py says what each kill checks.
"""

from __future__ import annotations

import os
import queue
import random
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.engine.storage import checkpoint, records
from refimpl.engine.storage.wal_repair import inspect_log
from refimpl.engine.storage.wal_segments import HEADER, HEADER_SIZE, frame_header
from tests.engine.crash_child import ACCOUNTS, OPTIONS, START_BALANCE, Model, plan_threaded

CHILD = Path(__file__).with_name("crash_child.py")
ROOT = Path(__file__).resolve().parents[2]
TAIL_MESSAGE = re.compile(
    r"^database 'demo': cut a torn tail of (\d+) bytes from (\S+\.wal) at offset (\d+)"
    r" \((after LSN \d+|before any record)\)$"
)


class ForkServer:
    """`crash_child.py serve`: forks one writer at a time; its lines arrive on a queue."""

    def __init__(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.process = subprocess.Popen(
            [sys.executable, str(CHILD), "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
            env=env,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.expect("SERVER READY", timeout=60)

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def next_line(self, timeout: float) -> str | None:
        """The next line, or None when none came within `timeout` seconds."""
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if line is None:
            raise AssertionError("the fork server ended")
        if line.startswith("ERROR"):
            raise AssertionError(f"the writer failed: {line}")
        return line

    def expect(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            line = self.next_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"no line starting {prefix!r} within {timeout} s")
            if line.startswith(prefix):
                return line

    def start(self, path: Path, checkpoint_every: int, threads: int = 1) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(f"RUN {path} {checkpoint_every} 60 {threads}\n")
        self.process.stdin.flush()
        return int(self.expect("PID ", timeout=30).split()[1])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@dataclass
class CrashStats:
    kills: int = 0
    kills_in_checkpoint: int = 0
    kills_in_background_checkpoint: int = 0
    half_written_checkpoints: int = 0
    commits_acknowledged: int = 0
    commits_verified: int = 0
    unacknowledged_present: int = 0
    tails_torn: int = 0
    records_cut: int = 0
    tails_cut: int = 0
    seconds: float = 0.0
    modes: dict[str, int] = field(default_factory=dict)

    def lines(self) -> list[str]:
        return [
            f"kills: {self.kills} ({', '.join(f'{k} {v}' for k, v in sorted(self.modes.items()))})",
            f"kills during an explicit CHECKPOINT: {self.kills_in_checkpoint}",
            f"kills during a background checkpoint: {self.kills_in_background_checkpoint}",
            f"kills that left a half-written checkpoint file: {self.half_written_checkpoints}",
            f"commits acknowledged: {self.commits_acknowledged}",
            f"commits verified after the last recovery: {self.commits_verified}",
            f"unacknowledged commits found durable: {self.unacknowledged_present}",
            f"torn tails written: {self.tails_torn} ({self.records_cut} cutting an"
            f" unacknowledged commit); recoveries that cut a tail: {self.tails_cut}",
            f"time: {self.seconds:.1f} s",
        ]


class CrashRun:
    """Kill, tear, reopen, verify; again and again on one data folder."""

    def __init__(
        self, path: Path, seed: int, checkpoint_every: int = 100, threads: int = 1
    ) -> None:
        self.path = path
        self.rng = random.Random(seed)
        self.checkpoint_every = checkpoint_every
        self.threads = threads
        self.model = Model()
        self.last_acked = 0  # one writer: the last acknowledged transaction
        self.acked: set[int] = set()  # every acknowledged transaction
        self.cut_txns: set[int] = set()  # transactions whose record a torn tail cut
        self.stats = CrashStats()
        self.server = ForkServer()

    def close(self) -> None:
        self.server.close()

    def run(self, kills: int, seconds: float, min_kills: int = 0) -> CrashStats:
        started = time.monotonic()
        while self.stats.kills < kills:
            elapsed = time.monotonic() - started
            if elapsed > seconds and self.stats.kills >= min_kills:
                break
            self.cycle()
        self.stats.seconds = time.monotonic() - started
        return self.stats

    def cycle(self) -> None:
        pid = self.server.start(self.path, self.checkpoint_every, self.threads)
        ready = self.server.expect("READY ", timeout=60)
        assert int(ready.split()[1]) >= self.last_acked, ready
        mode = self.rng.choices(["timed", "ack", "checkpoint", "background"], weights=[4, 3, 2, 2])[
            0
        ]
        in_checkpoint = in_background = False
        if mode == "timed":
            deadline = time.monotonic() + self.rng.uniform(0.0, 0.4)
            while (left := deadline - time.monotonic()) > 0:
                self.note(self.server.next_line(left))
        elif mode == "ack":
            for _ in range(self.rng.randint(1, 150)):
                self.note(self.server.expect("ACK ", timeout=30))
        else:
            aim = "CKPT" if mode == "checkpoint" else "BGCKPT"
            deadline = time.monotonic() + 5  # then kill anyway
            found = False
            while not found and (left := deadline - time.monotonic()) > 0:
                line = self.server.next_line(left)
                self.note(line)
                found = line is not None and line.split()[0] == aim
            time.sleep(self.rng.uniform(0.0, 0.004))
            in_checkpoint = found and mode == "checkpoint"
            in_background = found and mode == "background"
        os.kill(pid, signal.SIGKILL)
        while True:
            line = self.server.expect("", timeout=30)
            if line.startswith("EXIT "):
                assert line.split()[1] == str(pid), line
                status = int(line.split()[2])
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, line
                break
            if line.startswith("CKPTDONE"):
                in_checkpoint = False
            if line == "BGCKPTDONE":
                in_background = False
            self.note(line)
        self.stats.kills += 1
        self.stats.modes[mode] = self.stats.modes.get(mode, 0) + 1
        self.stats.kills_in_checkpoint += in_checkpoint
        self.stats.kills_in_background_checkpoint += in_background
        folder = self.path / "demo" / "checkpoints"
        if folder.is_dir() and any(folder.glob("*.tmp")):
            self.stats.half_written_checkpoints += 1
        torn = self.rng.random() < 0.3 and self.tear_tail()
        self.verify(torn)

    def note(self, line: str | None) -> None:
        if line is not None and line.startswith("ACK "):
            k = int(line.split()[1])
            if self.threads == 1:
                assert k > self.last_acked, line
            assert k not in self.acked, line
            self.acked.add(k)
            self.last_acked = max(self.last_acked, k)
            self.stats.commits_acknowledged += 1

    def tear_tail(self) -> bool:
        """Leave what a write cut by a power failure leaves; False when nothing was torn.

        Either bytes after the last record (garbage, zeros, part of a next frame), or the last
        record itself cut short when it is a transaction nobody acknowledged (and no
        checkpoint holds it): that transaction must then be gone, all of it.
        """
        wal = self.path / "demo" / "wal"
        segments = sorted(wal.glob("*.wal")) if wal.is_dir() else []
        if not segments:
            return False
        report = inspect_log(wal)
        assert report.ok, report.sentences()
        if report.torn_tail is not None:
            return False  # the kill itself cut a write short; recovery must report it
        kind = self.rng.choice(["garbage", "zeros", "partial", "cut", "cut"])
        if kind == "cut" and self.cut_unacknowledged(segments[-1]):
            self.stats.tails_torn += 1
            return True
        if kind == "garbage":
            tail = self.rng.randbytes(self.rng.randint(1, 64))
        elif kind == "zeros":
            # Zeros after the last record are the log's end (what it writes ahead of it, see
            # wal_zeros), not a torn tail: nothing to cut or report.
            with open(segments[-1], "ab") as file:
                file.write(bytes(self.rng.randint(1, 4096)))
            return False
        else:
            payload = self.rng.randbytes(self.rng.randint(20, 300))
            frame = frame_header((report.last_lsn or 0) + 1, payload) + payload
            tail = frame[: self.rng.randint(1, len(frame) - 1)]
        with open(segments[-1], "ab") as file:
            file.write(tail)
        self.stats.tails_torn += 1
        return True

    def cut_unacknowledged(self, segment: Path) -> bool:
        data = segment.read_bytes()
        pos = last = 0
        while pos + HEADER_SIZE <= len(data) and HEADER.unpack_from(data, pos)[2]:
            last = pos  # a frame: zeros written ahead of the log hold no LSN
            pos += HEADER_SIZE + HEADER.unpack_from(data, pos)[0]
        if not data:
            return False
        length, _, lsn = HEADER.unpack_from(data, last)
        checkpoints = checkpoint.list_checkpoints(self.path / "demo" / "checkpoints")
        if checkpoints and checkpoints[-1][0] >= lsn:
            return False
        record = records.decode(lsn, data[last + HEADER_SIZE : last + HEADER_SIZE + length])
        txns = {
            row[0]
            for entry in record.entries
            if entry.kind == records.UPSERT and entry.table == "marks"
            for row in entry.payload[1]
        }
        if not txns or txns & self.acked:
            return False
        with open(segment, "r+b") as file:
            file.truncate(last + self.rng.randint(1, HEADER_SIZE + length - 1))
        self.cut_txns = txns
        self.stats.records_cut += 1
        return True

    def verify(self, torn: bool) -> None:
        connection = refimpl.connect(self.path, options=EngineOptions(**OPTIONS))
        try:
            messages = connection.instance.recovery_messages
            for message in messages:
                match = TAIL_MESSAGE.match(message)
                assert match, f"not a sentence about a cut tail: {message!r}"
                assert Path(match.group(2)).parent == self.path / "demo" / "wal", message
            if torn:
                assert len(messages) == 1, messages
            if messages:
                self.stats.tails_cut += 1
            for k in self.cut_txns:
                count = connection.execute("SELECT count(*) FROM marks WHERE txn = ?", (k,))
                assert count.rows == [(0,)], f"transaction {k} survived the cut of its record"
            self.cut_txns = set()
            self.check_tables(connection)
        finally:
            connection.close()

    def check_tables(self, connection: refimpl.Connection) -> None:
        run = connection.execute
        tables = {row[0] for row in run("SHOW TABLES").rows}
        if "marks" not in tables:
            assert self.last_acked == 0 and not tables, tables
            return
        if self.threads > 1:
            self.check_threaded(connection)
            return
        last = run("SELECT max(txn) FROM marks").rows[0][0] or 0
        assert last >= self.last_acked, f"acknowledged {self.last_acked} but only {last} is there"
        assert last <= self.last_acked + 1, f"{last} is there, past the one in flight"
        if last > self.last_acked:
            self.stats.unacknowledged_present += 1
            # Found durable: from now on it counts as acknowledged (never to be cut or lost).
            self.acked.add(last)
            self.last_acked = last
        # Marker rows of the newest transactions (older ones are counted as a whole below).
        low = max(0, self.model.applied - 20)
        groups = run(
            "SELECT txn, n, count(*) FROM marks WHERE txn > ? GROUP BY txn, n ORDER BY txn",
            (low,),
        ).rows
        self.model.apply_through(last)
        marks = self.model.marks_of
        expected = [(k, marks[k], marks[k]) for k in range(low + 1, last + 1)]
        assert groups == expected, f"marker rows (txn, n, count) differ after txn {low}"
        assert run("SELECT count(*) FROM marks").rows == [(self.model.marks,)]
        acct = run("SELECT * FROM acct").rows
        assert acct == self.model.acct_rows()
        assert sum(bal for _, bal in acct) == ACCOUNTS * START_BALANCE
        assert run("SELECT * FROM ev").rows == self.model.ev_rows()
        self.stats.commits_verified = last

    def check_threaded(self, connection: refimpl.Connection) -> None:
        """Several writers: each one's transactions present are a prefix of its sequence."""
        run = connection.execute
        groups = run("SELECT txn, n, count(*) FROM marks GROUP BY txn, n ORDER BY txn").rows
        present = []
        balances = [START_BALANCE] * ACCOUNTS
        for k, n, count in groups:
            ops = dict((op[0], op) for op in plan_threaded(k)[1])
            assert n == ops["marks"][2] and count == n, f"transaction {k}: {count} of {n} rows"
            present.append(k)
            if "transfer" in ops:
                _, a, b, x = ops["transfer"]
                balances[a] -= x
                balances[b] += x
        assert len(set(present)) == len(present)
        missing = self.acked - set(present)
        assert not missing, f"acknowledged transactions lost: {sorted(missing)[:10]}"
        threads = self.threads
        for t in range(threads):
            mine = [k for k in present if (k - 1) % threads == t]
            assert mine == list(range(t + 1, t + 1 + threads * len(mine), threads)), (
                f"writer {t}: a hole in its transactions"
            )
        unacked = set(present) - self.acked
        assert len(unacked) <= threads, unacked  # at most one in flight per writer
        self.stats.unacknowledged_present += len(unacked)
        self.acked |= unacked
        assert run("SELECT * FROM acct").rows == [(a, bal) for a, bal in enumerate(balances)]
        self.stats.commits_verified = len(present)

    def check_all_markers(self) -> None:
        if self.threads > 1:
            return  # check_threaded reads every marker row after each kill
        """Every transaction's marker rows, all of them (once, at the end: it reads them all)."""
        connection = refimpl.connect(self.path, options=EngineOptions(**OPTIONS))
        try:
            groups = connection.execute(
                "SELECT txn, n, count(*) FROM marks GROUP BY txn, n ORDER BY txn"
            ).rows
        finally:
            connection.close()
        marks = self.model.marks_of
        assert groups == [(k, marks[k], marks[k]) for k in range(1, self.model.applied + 1)]


def crash_run(
    path: Path, seed: int, kills: int, seconds: float, min_kills: int, threads: int = 1
) -> CrashStats:
    run = CrashRun(path, seed, threads=threads)
    try:
        stats = run.run(kills, seconds, min_kills)
        run.check_all_markers()
    finally:
        run.close()
    return stats

"""The writer that crash tests kill, and the model that checks what survived.

Transaction k (k = 1, 2, 3, ...) is a pure function of k (`plan`), so a checker can rebuild
exactly what the committed transactions 1..K must have left behind. Every transaction writes
`n` marker rows `(txn=k, n, i)` into the keyless table `marks`: after a crash they must be all
there or none (no partial transaction), and the transactions present must be exactly 1..K
with K at least the last acknowledged one (no lost commit, no hole).

Kinds of transaction: a single-row INSERT on its own; BEGIN ... COMMIT as separate `execute`
calls; and BEGIN ...; COMMIT as one script. The multi-statement ones also move money between
accounts (the balances always sum to the same total), insert, update (also key moves) and
delete rows of `ev`.

Run as a script:

    python crash_child.py run PATH [--checkpoint-every N] [--seconds S] [--threads T]
        opens PATH, prints `READY K`, then commits k = K+1, K+2, ...; prints `ACK k` (flushed)
        after each commit returns, `CKPT k` / `CKPTDONE k` around an explicit CHECKPOINT and
        `BGCKPT` / `BGCKPTDONE` around a background checkpoint.
        With T > 1 threads, thread t commits `plan_threaded` transactions t+1, t+1+T, ...
    python crash_child.py serve
        a fork server: imports refimpl once, then for every stdin line
        `RUN PATH [N [SECONDS [THREADS]]]` forks a
        writer as above (whose first line is `PID p`) and prints `EXIT p status` when it dies,
        so that each crash costs a fork, not a Python start with its grammar build.
"""

from __future__ import annotations

import os
import random
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

ACCOUNTS = 8
START_BALANCE = 1000


class CrashOptions(TypedDict):
    """The EngineOptions fields the crash tests set (the rest keep their defaults)."""

    segment_bytes: int
    wal_archive_bytes: int
    checkpoint_bytes: int
    statement_timeout: float


OPTIONS: CrashOptions = {
    # Small segments, archive and checkpoint threshold: background checkpoints and log trims
    # run every few hundred commits, so kills land on them too.
    "segment_bytes": 4096,
    "wal_archive_bytes": 16384,
    "checkpoint_bytes": 12288,
    "statement_timeout": 10.0,
}
SETUP = (
    "BEGIN;"
    " CREATE TABLE acct (id INT PRIMARY KEY, bal INT);"
    " CREATE TABLE marks (txn INT, n INT, i INT);"
    " CREATE TABLE ev (id INT PRIMARY KEY, txn INT, v INT);"
    " INSERT INTO acct VALUES "
    + ", ".join(f"({a}, {START_BALANCE})" for a in range(ACCOUNTS))
    + "; COMMIT"
)


# -- what transaction k does -------------------------------------------------------------


def plan(k: int) -> tuple[str, list[tuple]]:
    """(style, operations) of transaction k: 'single', 'calls' or 'script'."""
    rng = random.Random(k * 7919 + 17)
    if rng.random() < 0.35:
        return "single", [("marks", k, 1)]
    style = "calls" if rng.random() < 0.5 else "script"
    n = rng.randint(2, 6)
    ops: list[tuple] = [("marks", k, n)]
    a, b = rng.sample(range(ACCOUNTS), 2)
    ops.append(("transfer", a, b, rng.randint(1, 60)))
    ops.append(("ev_insert", k))
    ops.append(("ev_bump", k - rng.randint(0, 5)))
    if rng.random() < 0.5:
        ops.append(("ev_delete", k - rng.randint(3, 8)))
    if rng.random() < 0.2:
        ops.append(("ev_negate", k - rng.randint(1, 4)))
    if rng.random() < 0.2:
        ops.append(("ev_delete", -(k - rng.randint(10, 20))))
    rng.shuffle(ops)
    return style, ops


def plan_threaded(k: int) -> tuple[str, list[tuple]]:
    """Transaction k of the threaded writer: marker rows and a transfer, which commute, so the
    state depends only on which transactions committed, not on their order."""
    rng = random.Random(k * 7919 + 17)
    if rng.random() < 0.35:
        return "single", [("marks", k, 1)]
    a, b = rng.sample(range(ACCOUNTS), 2)
    ops = [("marks", k, rng.randint(2, 5)), ("transfer", a, b, rng.randint(1, 60))]
    rng.shuffle(ops)
    return "calls" if rng.random() < 0.5 else "script", ops


def statements(op: tuple) -> list[tuple[str, tuple]]:
    kind = op[0]
    if kind == "marks":
        _, k, n = op
        if n == 1:
            return [("INSERT INTO marks VALUES (?, 1, 0)", (k,))]
        # Some marker rows in one statement, the rest one by one.
        half = n // 2
        first = (
            "INSERT INTO marks VALUES " + ", ".join("(?, ?, ?)" for _ in range(half)),
            tuple(v for i in range(half) for v in (k, n, i)),
        )
        rest = [("INSERT INTO marks VALUES (?, ?, ?)", (k, n, i)) for i in range(half, n)]
        return [first, *rest]
    if kind == "transfer":
        _, a, b, x = op
        return [
            ("UPDATE acct SET bal = bal - ? WHERE id = ?", (x, a)),
            ("UPDATE acct SET bal = bal + ? WHERE id = ?", (x, b)),
        ]
    if kind == "ev_insert":
        return [("INSERT INTO ev VALUES (?, ?, 0)", (op[1], op[1]))]
    if kind == "ev_bump":
        return [("UPDATE ev SET v = v + 1 WHERE id >= ?", (op[1],))]
    if kind == "ev_delete":
        return [("DELETE FROM ev WHERE id = ?", (op[1],))]
    if kind == "ev_negate":
        return [("UPDATE ev SET id = -id WHERE id = ?", (op[1],))]
    raise ValueError(op)


@dataclass
class Model:
    """What transactions 1..applied must have left in acct, ev and marks."""

    applied: int = 0
    balances: list[int] = field(default_factory=lambda: [START_BALANCE] * ACCOUNTS)
    ev: dict[int, tuple[int, int]] = field(default_factory=dict)  # id -> (txn, v)
    marks: int = 0
    marks_of: dict[int, int] = field(default_factory=dict)  # txn -> n

    def apply_through(self, last: int) -> None:
        while self.applied < last:
            self.applied += 1
            self.apply(self.applied)

    def apply(self, k: int) -> None:
        for op in plan(k)[1]:
            kind = op[0]
            if kind == "marks":
                self.marks += op[2]
                self.marks_of[k] = op[2]
            elif kind == "transfer":
                _, a, b, x = op
                self.balances[a] -= x
                self.balances[b] += x
            elif kind == "ev_insert":
                self.ev[k] = (k, 0)
            elif kind == "ev_bump":
                for key, (txn, v) in list(self.ev.items()):
                    if key >= op[1]:
                        self.ev[key] = (txn, v + 1)
            elif kind == "ev_delete":
                self.ev.pop(op[1], None)
            elif kind == "ev_negate":
                if op[1] in self.ev:
                    self.ev[-op[1]] = self.ev.pop(op[1])

    def acct_rows(self) -> list[tuple]:
        return [(a, bal) for a, bal in enumerate(self.balances)]

    def ev_rows(self) -> list[tuple]:
        return [(key, *self.ev[key]) for key in sorted(self.ev)]


# -- the writer ----------------------------------------------------------------------------


_say_lock = threading.Lock()


def say(line: str) -> None:
    with _say_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def run_writer(path: str, checkpoint_every: int, seconds: float, threads: int = 1) -> None:
    import refimpl
    from refimpl.engine.options import EngineOptions
    from refimpl.engine.storage.database import Database

    background = Database._background_checkpoint

    def traced(database: Database) -> None:
        # Tells the killer when a background checkpoint runs, so that it can aim at one.
        say("BGCKPT")
        background(database)
        say("BGCKPTDONE")

    # Only in this child process, whose checkpoints the killer aims at.
    Database._background_checkpoint = traced  # type: ignore[method-assign, assignment]
    connection = refimpl.connect(path, options=EngineOptions(**OPTIONS))
    session = connection.session()
    tables = {row[0] for row in session.execute("SHOW TABLES").rows}
    if "marks" not in tables:
        session.execute(SETUP)
    last = session.execute("SELECT max(txn) FROM marks").rows[0][0] or 0
    say(f"READY {last}")
    if threads > 1:
        run_threads(connection, checkpoint_every, seconds, threads)
        return
    deadline = time.monotonic() + seconds
    k = last + 1
    while time.monotonic() < deadline:
        commit(session, k)
        say(f"ACK {k}")
        if checkpoint_every and k % checkpoint_every == 0:
            say(f"CKPT {k}")
            session.execute("CHECKPOINT")
            say(f"CKPTDONE {k}")
        k += 1
    connection.close()
    say("DONE")


def run_threads(connection: Any, checkpoint_every: int, seconds: float, threads: int) -> None:
    """Thread t commits transactions t+1, t+1+T, t+1+2T, ... (T threads), each acknowledged."""
    deadline = time.monotonic() + seconds

    def writer(t: int) -> None:
        session = connection.session()
        last = session.execute(
            "SELECT max(txn) FROM marks WHERE (txn - 1) % ? = ?", (threads, t)
        ).rows[0][0]
        k = t + 1 if last is None else last + threads
        done = 0
        while time.monotonic() < deadline:
            commit(session, k, plan_threaded)
            say(f"ACK {k}")
            done += 1
            if t == 0 and checkpoint_every and done % checkpoint_every == 0:
                say(f"CKPT {k}")
                session.execute("CHECKPOINT")
                say(f"CKPTDONE {k}")
            k += threads

    workers = [threading.Thread(target=writer, args=(t,)) for t in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    connection.close()
    say("DONE")


def commit(session: Any, k: int, planner: Any = plan) -> None:
    style, ops = planner(k)
    steps = [step for op in ops for step in statements(op)]
    if style == "single":
        session.execute(*steps[0])
    elif style == "calls":
        session.execute("BEGIN")
        for sql, params in steps:
            session.execute(sql, params)
        session.execute("COMMIT")
    else:
        script = "BEGIN; " + "; ".join(sql for sql, _ in steps) + "; COMMIT"
        session.execute(script, tuple(v for _, params in steps for v in params))


def serve() -> None:
    import refimpl  # noqa: F401 - imported once, before any fork

    say("SERVER READY")
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] != "RUN":
            continue
        every = int(words[2]) if len(words) > 2 else 0
        seconds = float(words[3]) if len(words) > 3 else 60.0
        threads = int(words[4]) if len(words) > 4 else 1
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                say(f"PID {os.getpid()}")
                run_writer(words[1], every, seconds, threads)
            except BaseException as error:  # report, then leave without the server's cleanup
                say(f"ERROR {error!r}")
                code = 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        say(f"EXIT {pid} {status}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["serve"]:
        serve()
    elif argv[:1] == ["run"] and len(argv) >= 2:

        def option(name: str, default: str) -> str:
            return argv[argv.index(name) + 1] if name in argv else default

        every, seconds = int(option("--checkpoint-every", "0")), float(option("--seconds", "60"))
        run_writer(argv[1], every, seconds, int(option("--threads", "1")))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])

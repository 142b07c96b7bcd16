"""The long run of the hostile-input fuzz (tests/http/test_sql_fuzz.py and
test_hostile_fuzz.py are its short runs in the suite), against a server it starts.

    python tools/fuzz_sql.py --statements 100000 --workers 2   # generated SQL at /exec
    python tools/fuzz_sql.py --requests 20000                  # hostile raw HTTP requests
    python tools/fuzz_sql.py --statements 5000 --requests 2000 --seed 7

For every statement or request: no 5xx, an error sentence in JSON for every 4xx, no traceback
or error in the server's log, `/health` answering within 2 s afterwards, and nothing changed
by a refused request. Unlike the tests, a failure does not stop the run: it is counted and
the first ones are printed with their input, and the run exits 1. It prints statements (or
requests), the statuses by code, the 5xx count, the log's tracebacks and the seconds taken.

Two things make the long run affordable. `--workers N` runs N fuzzers, each in its own
process with its own server and seed, and adds up their figures. And a statement refused
before anything of it ran (its script did not parse: the answer has a `position` and no
`statement`) is compared with the database's state only every `--parse-check-every`-th time;
every other refusal is compared every time, as in the suite.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.http.conftest import start_server  # noqa: E402
from tests.http.fuzz_judge import Target, judge, shorten  # noqa: E402
from tests.http.hostile_requests import raw_requests, send  # noqa: E402
from tests.http.sql_texts import sql_texts  # noqa: E402

RESET_EVERY = 500  # statements between fresh databases: the tables stay small
SHOWN = 20  # failures printed in full
PROGRESS_EVERY = 1000


class Tally:
    """Figures of one run: answers by status, failures with their inputs."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.statuses: Counter[int] = Counter()
        self.failures: list[tuple[str, object, list[str]]] = []
        self.sent = 0
        self.hidden_failures = 0  # failures of workers beyond those they sent in full
        self.started = time.monotonic()

    def add(self, shown: str, status: object, problems: list[str]) -> None:
        self.sent += 1
        for code in status if isinstance(status, list) else [status]:
            self.statuses[code] += 1  # type: ignore[index]
        if problems:
            self.failures.append((shown, status, problems))
        if self.sent % PROGRESS_EVERY == 0:
            print(
                f"  ... {self.sent:,} {self.what}, {len(self.failures)} with a problem,"
                f" {time.monotonic() - self.started:.0f} s",
                file=sys.stderr,
                flush=True,
            )

    def to_json(self) -> dict:
        return {
            "what": self.what,
            "statuses": dict(self.statuses),
            "sent": self.sent,
            "failures": self.failures[:SHOWN],
            "failed": len(self.failures),
            "took": time.monotonic() - self.started,
        }

    @classmethod
    def merged(cls, parts: list[dict]) -> Tally:
        """One tally of the workers' tallies; the run took as long as its slowest worker."""
        tally = cls(parts[0]["what"])
        for part in parts:
            tally.statuses.update({int(code): n for code, n in part["statuses"].items()})
            tally.sent += part["sent"]
            tally.failures += [tuple(failure) for failure in part["failures"]]
            tally.hidden_failures += part["failed"] - len(part["failures"])
        tally.started = time.monotonic() - max(part["took"] for part in parts)
        return tally

    def report(self) -> bool:
        took = time.monotonic() - self.started
        server_errors = sum(n for code, n in self.statuses.items() if code >= 500)
        logged = sum(
            1
            for _, _, problems in self.failures
            for problem in problems
            if problem.startswith("server log:")
        )
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        print(f"{self.what}: {self.sent:,} in {took:.1f} s ({self.sent / took:.0f}/s)")
        print(f"  statuses: {codes}")
        failed = len(self.failures) + self.hidden_failures
        print(
            f"  5xx: {server_errors}   log lines with a traceback or error: {logged}"
            f"   inputs with a problem: {failed}"
        )
        for shown, status, problems in self.failures[:SHOWN]:
            print(f"  - {status} {shown}")
            for problem in problems[:3]:
                print(f"      {problem[:400]}")
        return not self.failures and not self.hidden_failures


def run(
    examples: int, seed: int | None, strategy: st.SearchStrategy, one: Callable[[object], None]
) -> None:
    """Hypothesis as a generator only: no shrinking, nothing stored, every example sent."""

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        derandomize=seed is None,
    )
    @given(value=strategy)
    def check(value: object) -> None:
        one(value)

    if seed is not None:
        check = hypothesis_seed(seed)(check)
    check()


def fuzz_statements(
    target: Target, statements: int, seed: int | None, parse_check_every: int
) -> Tally:
    tally = Tally("statements")

    def one(sql: object) -> None:
        assert isinstance(sql, str)
        if tally.sent and tally.sent % RESET_EVERY == 0:
            target.reset()
        status, problems = judge(target, sql, compare=tally.sent % parse_check_every == 0)
        tally.add(shorten(sql), status, problems)

    run(statements, seed, sql_texts(), one)
    return tally


def fuzz_requests(target: Target, requests: int, seed: int | None) -> Tally:
    tally = Tally("requests")

    def one(data: object) -> None:
        assert isinstance(data, bytes)
        if tally.sent and tally.sent % RESET_EVERY == 0:
            target.reset()
        statuses, problems = send(target, data)
        tally.add(shorten(data.decode("latin-1")), statuses, problems)

    run(requests, seed, raw_requests(target), one)
    return tally


def fuzz_here(args: argparse.Namespace) -> tuple[list[Tally], bool]:
    """The run in this process, against a server of its own; its tallies and whether the
    server exited cleanly."""
    tallies = []
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(Path(folder) / "data")
        try:
            target = Target.on(server)
            if args.statements:
                tallies.append(
                    fuzz_statements(target, args.statements, args.seed, args.parse_check_every)
                )
            if args.requests:
                tallies.append(fuzz_requests(target, args.requests, args.seed))
        finally:
            code = server.stop()
        if code != 0:
            print(f"the server exited with {code}: {server.log.read_text()[-3000:]}")
    return tallies, code == 0


def fuzz_in_workers(args: argparse.Namespace) -> tuple[list[Tally], bool]:
    """`--workers` processes, each a run of this script with its share and its own seed."""
    base_seed = args.seed if args.seed is not None else 0
    workers = []
    for index in range(args.workers):
        share = [
            f"--statements={args.statements // args.workers}",
            f"--requests={args.requests // args.workers}",
        ]
        command = [
            sys.executable,
            __file__,
            *share,
            f"--seed={base_seed + index}",
            f"--parse-check-every={args.parse_check_every}",
            "--as-worker",
        ]
        workers.append(subprocess.Popen(command, stdout=subprocess.PIPE, text=True))
    results = []
    ok = True
    for worker in workers:
        out, _ = worker.communicate()
        *printed, last = out.rstrip("\n").split("\n") or [""]
        if printed:
            print("\n".join(printed))
        try:
            results.append(json.loads(last))
        except json.JSONDecodeError:
            print(f"a worker ended without its figures (exit {worker.returncode}): {last}")
            ok = False
        ok = ok and worker.returncode == 0
    by_kind: dict[str, list[dict]] = {}
    for result in results:
        ok = ok and result["server_ok"]
        for part in result["tallies"]:
            by_kind.setdefault(part["what"], []).append(part)
    return [Tally.merged(parts) for parts in by_kind.values()], ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=100_000, help="generated SQL texts")
    parser.add_argument("--requests", type=int, default=0, help="generated raw HTTP requests")
    parser.add_argument("--seed", type=int, help="a Hypothesis seed (default: derandomized)")
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="fuzzing processes, each with its own server and seed",
    )
    parser.add_argument(
        "--parse-check-every",
        type=int,
        default=10,
        help="compare the state after every n-th script refused unparsed",
    )
    parser.add_argument("--as-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.as_worker:
        tallies, server_ok = fuzz_here(args)
        print(
            json.dumps({"tallies": [tally.to_json() for tally in tallies], "server_ok": server_ok})
        )
        return 0
    if args.workers > 1:
        tallies, ok = fuzz_in_workers(args)
    else:
        tallies, ok = fuzz_here(args)
    reported = all([tally.report() for tally in tallies])
    return 0 if ok and reported else 1


if __name__ == "__main__":
    raise SystemExit(main())

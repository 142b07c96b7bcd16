"""Schemathesis over the whole OpenAPI document against a live server (the suite's short run
is tests/http/test_schemathesis.py).

    python tools/schemathesis_run.py                       # starts its own server
    python tools/schemathesis_run.py --cases 10000
    python tools/schemathesis_run.py --url http://127.0.0.1:9000 --token kdb_... --seed 3

The cases are shared out evenly over every operation of `/openapi.json`, valid and invalid
(schemathesis's positive and negative modes), with the admin's token and anonymous, half of
them naming the database that exists. The pass condition: no 5xx and no schema violation
(documented status codes and content types, bodies that match their schemas), and, for a
server it started, nothing in its log but what a healthy server logs. A failure does not stop
the run: each kind is counted, the first of each printed with a curl command that repeats
it. Exits 1 when there was any.

A server given with --url should be started with a short `stream_max_age_s` (the server this
script starts has 2 s): schemathesis reads an event stream to its end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402
import schemathesis  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from schemathesis.core.failures import Failure, FailureGroup  # noqa: E402
from schemathesis.core.result import Err  # noqa: E402

from tests.http.conftest import start_server  # noqa: E402
from tests.http.schema_checks import CHECKS, STREAM_SETTINGS  # noqa: E402

MODES = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]


class Figures:
    """Answers by status, and failures by kind with the first case of each."""

    def __init__(self) -> None:
        self.statuses: Counter[int] = Counter()
        self.by_operation: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.first: dict[str, str] = {}
        self.unsatisfiable: list[str] = []  # operations and modes with no case to make
        self.started = time.monotonic()

    def failed(self, kind: str, case: schemathesis.Case, detail: str) -> None:
        self.failures[kind] += 1
        if kind not in self.first:
            self.first[kind] = f"{detail[:500]}\n      {case.as_curl_command()[:800]}"

    def report(self) -> None:
        took = time.monotonic() - self.started
        total = sum(self.statuses.values())
        codes = ", ".join(f"{code}: {n}" for code, n in sorted(self.statuses.items()))
        server_errors = sum(n for code, n in self.statuses.items() if code >= 500)
        print(f"{total:,} cases in {took:.1f} s ({total / max(took, 1e-9):.0f}/s)")
        print(f"  statuses: {codes}")
        print("  by operation: " + ", ".join(f"{k} {n}" for k, n in self.by_operation.items()))
        violations = sum(n for kind, n in self.failures.items() if kind != "server error")
        print(f"  5xx: {server_errors}   schema violations: {violations}")
        if self.unsatisfiable:
            print(
                "  no case could be made for (mode, auth): "
                + ", ".join(sorted(set(self.unsatisfiable)))
            )
        for kind, n in self.failures.most_common():
            print(f"  - {kind}: {n}\n      {self.first[kind]}")


def kind_of(failure: Failure) -> str:
    return getattr(failure, "title", "") or type(failure).__name__


def fuzz(url: str, token: str | None, cases: int, seed: int | None) -> Figures:
    api = schemathesis.openapi.from_url(url + "/openapi.json")
    operations = []
    for result in api.get_all_operations():
        if isinstance(result, Err):
            raise result.err()
        operations.append(result.ok())
    strategies = [
        (operation.label, operation.as_strategy(generation_mode=mode, query=query), auth)
        for operation in operations
        for mode in MODES
        for query in (None, {"db": "demo"})
        for auth in ([token, None] if token else [None])
    ]  # fmt: skip
    figures = Figures()
    http = requests.Session()
    each = max(1, cases // len(strategies))

    def run(label: str, strategy: st.SearchStrategy, headers: dict[str, str]) -> None:
        @settings(
            max_examples=each,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
            derandomize=seed is None,
        )
        @given(data=st.data())
        def check(data: st.DataObject) -> None:
            case = data.draw(strategy)
            if not headers:
                case.headers = {
                    k: v for k, v in (case.headers or {}).items() if k.lower() != "authorization"
                }
            try:
                response = case.call(base_url=url, session=http, headers=headers, timeout=60)
            except requests.RequestException as error:
                figures.failed("no answer", case, str(error))
                return
            figures.statuses[response.status_code] += 1
            figures.by_operation[label] += 1
            try:
                case.validate_response(response, checks=CHECKS)
            except FailureGroup as group:
                for failure in group.exceptions:
                    figures.failed(kind_of(failure), case, str(failure))
            except Failure as failure:
                figures.failed(kind_of(failure), case, str(failure))

        if seed is not None:
            check = hypothesis_seed(seed)(check)
        try:
            check()
        except Unsatisfiable:  # no invalid request exists for it (e.g. /health, negative)
            figures.unsatisfiable.append(label)

    for label, strategy, auth in strategies:
        run(label, strategy, {"Authorization": f"Bearer {auth}"} if auth else {})
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--token", help="a token for --url (the admin's gives the most reach)")
    parser.add_argument("--cases", type=int, default=10_000, help="generated requests")
    parser.add_argument("--seed", type=int, help="a Hypothesis seed (default: derandomized)")
    args = parser.parse_args()
    if args.url:
        figures = fuzz(args.url.rstrip("/"), args.token, args.cases, args.seed)
        figures.report()
        return 1 if figures.failures else 0
    with tempfile.TemporaryDirectory() as folder:
        data = Path(folder) / "data"
        data.mkdir()
        # An event stream lives until its maximum age and schemathesis reads a response to its
        # end: short streams keep each such case to seconds instead of half an hour.
        (data / "kdb.conf").write_text(STREAM_SETTINGS, encoding="utf-8")
        server = start_server(data)
        try:
            server.sql("CREATE TABLE t (id INT, name STRING, ts TIMESTAMP)")
            server.sql("INSERT INTO t VALUES (1, 'a', '2026-01-01T00:00:00Z')")
            figures = fuzz(server.url, server.token, args.cases, args.seed)
        finally:
            code = server.stop()
        figures.report()
        # A request's own log line may hold any text its URL had ("Traceback" among them):
        # only a traceback's first line or an ERROR record counts.
        logged = [
            line
            for line in server.log.read_text().splitlines()
            if line.startswith("Traceback") or " ERROR " in line
        ]
        if logged:
            print("the server logged:\n  " + "\n  ".join(logged[:20]))
        if code != 0:
            print(f"the server exited with {code}")
        return 1 if figures.failures or logged or code != 0 else 0


if __name__ == "__main__":
    raise SystemExit(main())

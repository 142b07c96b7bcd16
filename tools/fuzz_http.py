"""The long schemathesis run against a live server (tests/http/test_schemathesis.py is short).

    python tools/fuzz_http.py                      # starts its own server in a temporary folder
    python tools/fuzz_http.py --examples 5000
    python tools/fuzz_http.py --url http://127.0.0.1:9000 --token kdb_...

Every generated request (valid and invalid, with the admin token and anonymous) must get an
answer that the OpenAPI document describes: no 5xx, documented status codes and content
types, bodies that match their schemas. Exits 1 on the first failure, with the request that
caused it (Hypothesis shrinks it first).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import schemathesis  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.http.conftest import start_server  # noqa: E402
from tests.http.test_schemathesis import CHECKS  # noqa: E402


def fuzz(url: str, token: str | None, examples: int, seed: int | None) -> None:
    api = schemathesis.openapi.from_url(url + "/openapi.json")
    modes = [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE]
    strategy = st.one_of(
        *(api.as_strategy(generation_mode=m) for m in modes),
        *(api.as_strategy(generation_mode=m, query={"db": "demo"}) for m in modes),
    )
    auth = st.sampled_from([{"Authorization": f"Bearer {token}"}] if token else [{}]) | st.just({})
    counts: dict[int, int] = {}

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        derandomize=seed is None,
    )
    @given(case=strategy, headers=auth)
    def check(case: schemathesis.Case, headers: dict[str, str]) -> None:
        response = case.call_and_validate(base_url=url, headers=headers, checks=CHECKS, timeout=60)
        counts[response.status_code] = counts.get(response.status_code, 0) + 1

    if seed is not None:
        from hypothesis import seed as hypothesis_seed

        check = hypothesis_seed(seed)(check)
    started = time.monotonic()
    check()
    took = time.monotonic() - started
    summary = ", ".join(f"{status}: {n}" for status, n in sorted(counts.items()))
    print(f"{sum(counts.values())} requests in {took:.1f} s, all conforming ({summary})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a running server (default: start one)")
    parser.add_argument("--token", help="a token for --url (the admin's gives the most reach)")
    parser.add_argument("--examples", type=int, default=2000, help="generated requests")
    parser.add_argument("--seed", type=int, help="a Hypothesis seed (default: derandomized)")
    args = parser.parse_args()
    if args.url:
        fuzz(args.url.rstrip("/"), args.token, args.examples, args.seed)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        server = start_server(Path(folder) / "data")
        try:
            server.sql("CREATE TABLE t (id INT, name STRING, ts TIMESTAMP)")
            fuzz(server.url, server.token, args.examples, args.seed)
        finally:
            code = server.stop()
        if code != 0:
            print(f"the server exited with {code}; its log: {server.log}", file=sys.stderr)
            return 1
        errors = [line for line in server.log.read_text().splitlines() if " ERROR " in line]
        if errors:
            print("the server logged errors:\n" + "\n".join(errors[:20]), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

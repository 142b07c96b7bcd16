"""`refimpl conform`: run the conformance suite against a server.

    refimpl conform --url URL [--token T] [--only PATTERN] [--skip-file F] [--expect-file F]
                    [--jobs N] [--wait-places N] [--junit FILE] [--json FILE]
                    [--examples DIR] [--timeout S]
                    [--restart-cmd CMD] [--crash-cmd CMD] [--restart-timeout S]
                    [--pg HOST:PORT] [--start-cmd CMD] [--operator-cmd CMD] [--fail-fast]
                    [--rerun-failed REPORT]
                    [--verbose] [--list]

Before any example, a preflight checks the target once (`conformance/preflight.py`): the
URL's scheme, that `GET /health` answers, that the token is valid and an admin's, and that
`--pg` accepts connections; the first wrong answer is one line on stderr and exit code 2.

`main(argv)` returns the exit code: 0 when nothing failed (unexpected passes count as
failures), 1 when something failed, 2 for a usage or case-file problem.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from conformance.case_files import default_examples_dir, load_examples, spec_version_of
from conformance.cases import CaseError
from conformance.expectations import Expectation, id_matches, load_expectations, load_skip_file
from conformance.preflight import PreflightError, preflight
from conformance.report import (
    ChapterProgress,
    Progress,
    RunInfo,
    counts,
    failed_ids,
    print_report,
    write_json,
    write_junit,
)
from conformance.restarts import RestartCommands
from conformance.results import ExampleResult
from conformance.runner import Runner, RunOptions
from conformance.wait_places import DEFAULT_WAIT_PLACES

TOKEN_ENV = "CONFORM_TOKEN"


def shipped_spec_version() -> str:
    """The spec version of the cases shipped with this package."""
    shipped = default_examples_dir()
    if shipped is None:
        return "none (no cases shipped)"
    try:
        return spec_version_of(shipped)
    except CaseError as exc:
        return f"unknown ({exc})"


def package_version() -> str:
    try:
        return metadata.version("refimpl")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def version_line() -> str:
    """Which runner this is and which spec version its shipped cases are of."""
    return f"refimpl conform {package_version()}: the cases of spec {shipped_spec_version()}"


def _at_least_one(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `refimpl conform` (also used by tools/verify_docs.py)."""
    parser = argparse.ArgumentParser(
        prog="refimpl conform",
        description="Run the conformance examples of the specification against a server.",
    )
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument("--url", required=True, help="base URL, e.g. http://127.0.0.1:9000")
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"admin token (default: ${TOKEN_ENV}; none for a server run with --dev)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="PATTERN",
        help="run only ids matching (glob, or a word the id contains); may repeat",
    )
    parser.add_argument("--skip-file", type=Path, help="ids (or globs) to skip, one a line")
    parser.add_argument(
        "--expect-file", type=Path, help="known failures: lines '<id> FAIL <reason>'"
    )
    parser.add_argument("--jobs", type=int, default=8, help="examples run at once (default 8)")
    parser.add_argument(
        "--wait-places",
        type=_at_least_one,
        default=DEFAULT_WAIT_PLACES,
        metavar="N",
        help="the server's wait places: the examples running at once never hold more than N"
        f" waiting requests (default {DEFAULT_WAIT_PLACES}, a quarter of a default refimpl"
        " server's 16 threads); an example that needs more runs alone",
    )
    parser.add_argument("--junit", type=Path, help="write a JUnit XML report here")
    parser.add_argument("--json", type=Path, help="write a JSON report here")
    parser.add_argument("--examples", type=Path, help="a case file or a folder of them")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument(
        "--restart-cmd",
        metavar="CMD",
        help="shell command that restarts the server gracefully (same data and address);"
        " examples that restart are skipped without it",
    )
    parser.add_argument(
        "--crash-cmd",
        metavar="CMD",
        help="shell command that kills the server hard and starts it again",
    )
    parser.add_argument(
        "--restart-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds a restart may take until GET /health answers (default 60)",
    )
    parser.add_argument(
        "--pg",
        metavar="HOST:PORT",
        help="the PostgreSQL protocol's address: the examples with 'pg' steps run (skipped"
        " without it), and the SQL examples run over it too (ids end in @pg; needs psycopg)",
    )
    parser.add_argument(
        "--start-cmd",
        metavar="CMD",
        help="shell command that starts a server with the settings an example needs (given as"
        " KDB_<NAME> variables) and prints 'URL [HOST:PORT]' first; such examples are skipped"
        " without it",
    )
    parser.add_argument(
        "--operator-cmd",
        metavar="CMD",
        help="shell command that acts on the server as its operator: the runner runs"
        " 'CMD VERB ARGS' (restart, crash, backup NAME, check NAME, restore NAME,"
        " set NAME [VALUE], discard NAME); examples with operator steps are skipped without it",
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="stop at the first failure (the rest: skipped)"
    )
    parser.add_argument(
        "--rerun-failed",
        type=Path,
        metavar="REPORT",
        help="run only the examples a JSON report (--json) lists as failed",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="one line per example")
    parser.add_argument("--list", action="store_true", help="list the selected ids and stop")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the suite as the command line asks; return the exit code."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    source = args.examples or default_examples_dir()
    if source is None:
        print("error: no examples found; pass --examples DIR", file=sys.stderr)
        return 2
    try:
        examples = load_examples(source)
        rules: list[Expectation] = []
        if args.skip_file:
            rules.extend(load_skip_file(args.skip_file))
        if args.expect_file:
            rules.extend(load_expectations(args.expect_file))
        rerun = failed_ids(args.rerun_failed) if args.rerun_failed else None
    except (CaseError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.only:
        examples = [e for e in examples if any(id_matches(p, e.id) for p in args.only)]
    if rerun is not None:
        # Over the protocol an example's id ends in @pg; it is rerun with its HTTP original.
        wanted = {name.removesuffix("@pg") for name in rerun}
        examples = [e for e in examples if e.id in wanted]
        if not examples:
            print(f"{args.rerun_failed} lists no failed example: nothing to rerun")
            return 0
    known = {e.id for e in examples}
    for rule in rules:
        if not any(ch in rule.pattern for ch in "*?[") and rule.pattern not in known:
            print(f"note: {rule.pattern!r} in an expectations file names no selected example")
    if args.list:
        for example in examples:
            print(f"{example.id}\t{example.location}")
        return 0
    if not examples:
        print("error: no example matches the selection", file=sys.stderr)
        return 2
    if args.pg and importlib.util.find_spec("psycopg") is None:
        print(
            "error: --pg speaks the PostgreSQL protocol through psycopg, which is not"
            " installed: pip install 'refimpl[pg]'",
            file=sys.stderr,
        )
        return 2
    try:
        preflight(args.url, args.token, pg_address=args.pg, timeout=min(args.timeout, 10.0))
    except PreflightError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    # An operator command restarts the server too, where no restart command is given.
    operator = args.operator_cmd
    restarts = RestartCommands(
        args.restart_cmd or (f"{operator} restart" if operator else None),
        args.crash_cmd or (f"{operator} crash" if operator else None),
        args.restart_timeout,
    )
    runner = Runner(
        RunOptions(
            base_url=args.url,
            token=args.token,
            timeout=args.timeout,
            restarts=restarts,
            pg_address=args.pg,
            start_cmd=args.start_cmd,
            start_timeout=args.restart_timeout,
            operator_cmd=operator,
        )
    )
    print(
        f"running {len(examples)} example(s) against {args.url} with {args.jobs} job(s)"
        f" and {args.wait_places} wait place(s)"
    )
    progress = Progress(len(examples), verbose=args.verbose)
    chapters = ChapterProgress([e.chapter for e in examples], before_line=progress.end_line)

    def on_result(result: ExampleResult) -> None:
        progress(result)
        chapters(result)

    results = runner.run_all(
        examples,
        jobs=args.jobs,
        expectations=rules,
        on_result=on_result,
        fail_fast=args.fail_fast,
        wait_places=args.wait_places,
    )
    failed_over_http = counts(results)["failed"] > 0
    if args.pg and not (args.fail_fast and failed_over_http):
        from conformance.pg_client import PgRunner, pg_examples

        over_pg = pg_examples(examples)
        print(f"running {len(over_pg)} SQL example(s) over the PostgreSQL protocol at {args.pg}")
        pg_runner = PgRunner(runner.options, args.pg)
        results += pg_runner.run_all(
            over_pg, jobs=args.jobs, expectations=rules, fail_fast=args.fail_fast
        )
    print_report(results)
    if args.junit:
        write_junit(results, args.junit)
    if args.json:
        run = RunInfo(package_version(), started_at, time.monotonic() - started)
        write_json(results, args.json, args.url, run)
    return 0 if counts(results)["failed"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

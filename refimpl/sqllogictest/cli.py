"""`refimpl sqllogictest --url URL [--token T] FILE_OR_FOLDER...`: run sqllogictest scripts.

Prints, per file, the records passed, failed (by kind) and skipped, and its first failing
records; the exit code is 1 when a file passes fewer records than `--min-rate` asks (without
it: when any record failed), 2 for a usage error, a target that fails the preflight (the
URL, `/health`, an admin's token: `conformance/preflight.py`) or a script that does not
parse; each of those is one line on stderr. `--json` and `--junit` write reports,
`--rerun-failed REPORT` runs the files a JSON report lists as failed, `--fail-fast` stops
after the first file that fails.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from conformance.preflight import PreflightError, preflight
from refimpl.sqllogictest.records import ScriptError
from refimpl.sqllogictest.reports import (
    RunInfo,
    failed_files,
    file_failed,
    write_json,
    write_junit,
)
from refimpl.sqllogictest.runner import DEFAULT_ENGINES, FileResult, Server, run_file

PROG = "refimpl sqllogictest"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="refimpl sqllogictest",
        description="Run sqllogictest scripts against a server's /exec, each file in a fresh"
        " database. The runner answers to 'skipif sqlite' / 'onlyif sqlite': the corpus's"
        " expected answers are SQLite's.",
    )
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="FILE_OR_FOLDER",
        help="scripts, or folders searched for *.test",
    )
    parser.add_argument("--url", required=True, help="the server's base URL")
    parser.add_argument(
        "--token", default=os.environ.get("SLT_TOKEN"), help="an admin token (default $SLT_TOKEN)"
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip files whose path matches (e.g. '*/triggers/*'); may repeat",
    )
    parser.add_argument(
        "--engine",
        action="append",
        metavar="NAME",
        help="an engine name to answer to in skipif/onlyif (default sqlite)",
    )
    parser.add_argument(
        "--show",
        type=int,
        default=3,
        metavar="N",
        help="failing records shown per file (default 3)",
    )
    parser.add_argument(
        "--min-rate",
        type=float,
        metavar="PERCENT",
        help="fail when a file passes fewer of its records than this",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write a JSON report here")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="write a JUnit XML report")
    parser.add_argument(
        "--rerun-failed",
        type=Path,
        metavar="REPORT",
        help="run only the files a JSON report (--json) lists as failed",
    )
    parser.add_argument(
        "--fail-fast", action="store_true", help="stop after the first file that fails"
    )
    return parser


def script_files(paths: Sequence[Path], exclude: Sequence[str]) -> list[Path]:
    """The scripts named, folders expanded to their *.test files (sorted), minus exclusions."""
    files: list[Path] = []
    for path in paths:
        files.extend(sorted(path.rglob("*.test")) if path.is_dir() else [path])
    return [f for f in files if not any(fnmatch.fnmatch(str(f), g) for g in exclude)]


def _report(result: FileResult, show: int) -> None:
    kinds = ", ".join(f"{result.count(k)} {k}" for k in ("refused", "wrong", "broken"))
    halted = f", halted at line {result.halted_at}" if result.halted_at else ""
    print(
        f"{result.path}: {result.passed} passed, {result.failed} failed ({kinds}),"
        f" {result.skipped} skipped; {100 * result.rate:.2f}%{halted}"
    )
    for failure in result.failures[:show]:
        print(f"  line {failure.line} [{failure.kind}]: {_one_line(failure.sql)}")
        print(f"    expected: {_one_line(failure.expected)}")
        print(f"    got:      {_one_line(failure.got)}")


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _version() -> str:
    try:
        return metadata.version("refimpl")
    except metadata.PackageNotFoundError:
        return "(not installed)"


def _error(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    options = _parser().parse_args(argv)
    missing = [str(path) for path in options.paths if not path.exists()]
    if missing:
        return _error(f"no such file or folder: {', '.join(missing)}")
    files = script_files(options.paths, options.exclude)
    if options.rerun_failed is not None:
        try:
            wanted = {str(path) for path in failed_files(options.rerun_failed)}
        except (OSError, ValueError) as exc:
            return _error(str(exc))
        files = [path for path in files if str(path) in wanted]
        if not files:
            print(f"{options.rerun_failed} lists no failed file: nothing to rerun")
            return 0
    if not files:
        return _error("no scripts found")
    try:
        preflight(options.url, options.token, timeout=min(options.timeout, 10.0))
    except PreflightError as exc:
        return _error(str(exc))
    engines = frozenset(options.engine) if options.engine else DEFAULT_ENGINES
    print(f"answering to skipif/onlyif {', '.join(sorted(engines))}")
    started_at = datetime.now(UTC).isoformat(timespec="seconds")
    started = time.monotonic()
    server = Server(options.url, options.token, options.timeout)
    results: list[FileResult] = []
    try:
        for path in files:
            try:
                results.append(run_file(server, path, engines))
            except ScriptError as error:
                return _error(f"{path}: {error}")
            except (OSError, RuntimeError, UnicodeDecodeError) as error:
                return _error(f"{path}: {error}")
            _report(results[-1], options.show)
            if options.fail_fast and file_failed(results[-1], options.min_rate):
                print(f"stopping after {path}: --fail-fast")
                break
    finally:
        server.close()
    run = RunInfo(options.url, _version(), started_at, time.monotonic() - started)
    if options.json:
        write_json(options.json, results, run, options.min_rate)
    if options.junit:
        write_junit(options.junit, results, options.min_rate)
    passed = sum(r.passed for r in results)
    failed = sum(r.failed for r in results)
    wrong = sum(r.count("wrong") for r in results)
    ran = passed + failed
    print(
        f"total: {passed} passed, {failed} failed ({wrong} wrong), "
        f"{sum(r.skipped for r in results)} skipped;"
        f" {100 * passed / ran if ran else 100:.2f}% of {ran} records"
    )
    return 1 if any(file_failed(r, options.min_rate) for r in results) else 0

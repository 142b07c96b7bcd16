"""The mutation run: does the conformance suite catch each deviation of the catalogue?

    python tools/mutation/run.py                      # every deviation, against all chapters
    python tools/mutation/run.py --own-chapter        # the short form: each against its chapter
    python tools/mutation/run.py --only changes-next-own-table --only rev-boot-kept
    python tools/mutation/run.py --chapter changes --sample 6 --seed 1 --json report.json
    python tools/mutation/run.py --check              # only check that every entry applies

For each deviation: a copy of the `refimpl` package in a temporary folder with the edit
made (the checkout is never written), `refimpl serve --sample` started from the copy on a
free port with a fresh data folder, and the unchanged suite (this checkout's `conformance`
runner and `spec/examples`) run against it as any implementation is checked, with
`--restart-cmd` and `--crash-cmd` that restart the mutated server. A deviation is caught
when at least one example fails. First the unmutated copy runs the same selection: examples
it fails (work in progress elsewhere) are skipped in the runs, with a warning.
The figures are per chapter: caught / counted (deviations marked `equivalent` or
`unobservable` are listed apart, with their reasons). Exit 0 when every counted deviation
was caught, 1 when some survived (or kept the server from starting), 2 for a broken
catalogue or an unmutated copy that cannot be served.
The run is nice'd (`--nice`) and runs one deviation at a time unless `--jobs` says more.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.mutation.catalogue import (  # noqa: E402
    CATALOGUE,
    REPO,
    CatalogueError,
    Deviation,
    check,
    load,
    mutated_copy,
)
from tools.mutation.serving import MutantServer, ServerFailed  # noqa: E402

EXAMPLES = Path("spec") / "examples"  # under the tree the run takes its code from
RUN_TIMEOUT = 900.0  # seconds for one run of the suite; a hung server is caught by it
CAUGHT, SURVIVED, NO_START = "caught", "survived", "did not start"
PASSED, FAILED = "passed", "failed"  # the baseline's verdicts


@dataclass(frozen=True)
class RunSettings:
    own_chapter: bool = False
    runner_jobs: int = 4
    request_timeout: float = 60.0
    skipped: tuple[str, ...] = ()  # examples the unmutated code fails: not run
    chapters: tuple[str, ...] = ()  # the baseline's chapters (none: all)
    pg: bool = False  # the runner also speaks the PostgreSQL protocol (--pg)
    fail_fast: bool = False  # a deviation's run stops at its first failing example
    root: Path = REPO  # the tree of the code, the runner and the examples (--commit)


@dataclass
class Outcome:
    """What one run found: the verdict and the examples that failed."""

    deviation: Deviation | None  # None: the unmutated baseline
    verdict: str
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""

    def as_json(self) -> dict[str, object]:
        d = self.deviation
        return {
            "id": d.id if d else "(baseline)",
            "chapter": d.chapter if d else "",
            "counted": d.counted if d else False,
            "verdict": self.verdict,
            "failed_examples": self.failed,
            "seconds": round(self.seconds, 1),
            "note": self.note,
        }


def examples_for(deviation: Deviation | None, settings: RunSettings, work: Path) -> Path:
    """The case file of the deviation's chapter (the short form), or the chapters' of
    `settings.chapters` (a baseline of the short form), or every chapter's."""
    examples = settings.root / EXAMPLES
    if deviation is not None and settings.own_chapter:
        return examples / f"{deviation.chapter}.json"
    if deviation is None and settings.chapters:
        folder = work / "examples"
        folder.mkdir()
        for chapter in settings.chapters:
            (folder / f"{chapter}.json").symlink_to(examples / f"{chapter}.json")
        return folder
    return examples


def has_pg_steps(case_file: Path) -> bool:
    """Whether an example of the case file has a `pg` step (one that speaks the protocol)."""
    document = json.loads(case_file.read_text(encoding="utf-8"))
    steps = (step for example in document.get("examples", []) for step in example.get("steps", []))
    return any("pg" in step for step in steps)


def needs_pg(chosen: Sequence[Deviation], settings: RunSettings) -> bool:
    """Whether the examples the deviations run against have `pg` steps: without `--pg` the
    runner skips those examples, and a deviation only they catch would seem to survive."""
    examples = settings.root / EXAMPLES
    if settings.own_chapter:
        files = [examples / f"{chapter}.json" for chapter in {d.chapter for d in chosen}]
    else:
        files = sorted(examples.glob("*.json"))
    return any(has_pg_steps(file) for file in files if file.exists())


def runner_restart_options(root: Path = REPO) -> list[str]:
    """Which of the runner's restart options the runner of `root` has."""
    shown = subprocess.run(
        [sys.executable, "-m", "conformance.cli", "--help"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    options = ("--restart-cmd", "--crash-cmd", "--start-cmd", "--operator-cmd")
    return [option for option in options if option in shown]


def run_suite(
    server: MutantServer,
    examples: Path,
    settings: RunSettings,
    work: Path,
    restart_options: Sequence[str],
) -> tuple[int, list[str], str]:
    """Run the unchanged suite against `server`: exit code, failed ids, output tail."""
    report = work / "report.json"
    command = [
        sys.executable,
        "-m",
        "conformance.cli",
        "--url",
        server.url,
        "--token",
        server.token,
        "--examples",
        str(examples),
        "--jobs",
        str(settings.runner_jobs),
        "--timeout",
        str(settings.request_timeout),
        "--json",
        str(report),
    ]
    if settings.skipped:
        skip_file = work / "skip.txt"
        skip_file.write_text("".join(f"{i}\n" for i in settings.skipped), encoding="utf-8")
        command += ["--skip-file", str(skip_file)]
    if "--restart-cmd" in restart_options:
        command += ["--restart-cmd", server.restart_command("graceful")]
    if "--crash-cmd" in restart_options:
        command += ["--crash-cmd", server.restart_command("crash")]
    # Examples with settings and operator steps run on servers of the copy too; the SQL
    # examples over the PostgreSQL protocol only where that protocol is the chapter.
    if "--start-cmd" in restart_options:
        command += ["--start-cmd", server.start_command()]
    if "--operator-cmd" in restart_options:
        command += ["--operator-cmd", server.operator_command()]
    if settings.pg and server.pg_address:
        command += ["--pg", server.pg_address]
    if settings.fail_fast:
        command.append("--fail-fast")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        done = subprocess.run(
            command,
            cwd=settings.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return 1, ["(the run timed out)"], ""
    failed: list[str] = []
    if report.exists():
        results = json.loads(report.read_text(encoding="utf-8"))["results"]
        failing = [r for r in results if r["outcome"] in ("failed", "xpassed")]
        failed = [r["id"] for r in failing]
        if failing:
            # Why the first one failed: a catch by an example about something else (a
            # machine too loaded for a time bound) shows in it.
            return done.returncode, failed, f"{failing[0]['id']}: {failing[0]['message'][:400]}"
    return done.returncode, failed, (done.stdout + done.stderr)[-4000:]


def run_one(
    deviation: Deviation | None, settings: RunSettings, restart_options: Sequence[str]
) -> Outcome:
    """Apply the deviation to a copy, serve it, run the suite; what the suite found."""
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutation-") as folder:
        work = Path(folder)
        try:
            code = mutated_copy(deviation, work / "code", settings.root)
        except CatalogueError as exc:  # the code changed under a running catalogue
            return Outcome(deviation, "error", [], 0.0, str(exc))
        server = MutantServer(code, work)
        try:
            server.start()
        except ServerFailed as exc:
            return Outcome(
                deviation, NO_START, [], time.monotonic() - began, f"{exc}: {server.log_tail(600)}"
            )
        try:
            code_, failed, output = run_suite(
                server, examples_for(deviation, settings, work), settings, work, restart_options
            )
        finally:
            try:
                server.stop()
            except ServerFailed:
                pass
        seconds = time.monotonic() - began
        if code_ == 2:
            return Outcome(deviation, "error", failed, seconds, output)
        if deviation is None:
            return Outcome(
                None,
                FAILED if failed or code_ != 0 else PASSED,
                failed,
                seconds,
                output if failed or code_ != 0 else "",
            )
        verdict = CAUGHT if failed or code_ != 0 else SURVIVED
        note = output if failed or code_ != 0 else ""
        return Outcome(deviation, verdict, failed, seconds, note)


def select(deviations: list[Deviation], args: argparse.Namespace) -> list[Deviation]:
    chosen = deviations
    if args.only:
        known = {d.id for d in deviations}
        missing = [i for i in args.only if i not in known]
        if missing:
            raise CatalogueError(f"no deviation has the id {', '.join(missing)}")
        chosen = [d for d in chosen if d.id in args.only]
    if args.chapter:
        chosen = [d for d in chosen if d.chapter in args.chapter]
    if not args.all_entries:
        chosen = [d for d in chosen if d.counted]
    if args.sample is not None and args.sample < len(chosen):
        chosen = sorted(random.Random(args.seed).sample(chosen, args.sample), key=chosen.index)
    return chosen


def figures(outcomes: list[Outcome]) -> dict[str, dict[str, int]]:
    """Per chapter: counted deviations and how many the suite caught."""
    table: dict[str, dict[str, int]] = {}
    for outcome in outcomes:
        d = outcome.deviation
        if d is None or not d.counted:
            continue
        row = table.setdefault(d.chapter, {"caught": 0, "total": 0})
        row["total"] += 1
        # A deviation that keeps the server from starting proves nothing about the suite
        # (a broken tree does the same): it is not counted as caught.
        row["caught"] += outcome.verdict == CAUGHT
    return table


def print_summary(
    outcomes: list[Outcome], deviations: list[Deviation], write: Callable[[str], None] = print
) -> None:
    table = figures(outcomes)
    write("\nchapter               caught / total")
    for chapter, row in sorted(table.items()):
        write(f"{chapter:20}  {row['caught']:6} / {row['total']}")
    caught = sum(r["caught"] for r in table.values())
    total = sum(r["total"] for r in table.values())
    if total:
        write(f"{'all':20}  {caught:6} / {total}  ({100 * caught / total:.1f}%)")
    survivors = [
        o
        for o in outcomes
        if o.deviation and o.deviation.counted and o.verdict not in (CAUGHT, NO_START)
    ]
    if survivors:
        write("\nsurvivors:")
        for o in survivors:
            assert o.deviation is not None
            write(
                f"- {o.deviation.id} ({o.deviation.chapter}, {o.verdict}): {o.deviation.behaviour}"
            )
            if o.note:
                write("  " + o.note.strip().replace("\n", "\n  ")[-1500:])
    no_start = [o for o in outcomes if o.verdict == NO_START]
    if no_start:
        write("\ndid not start (not counted as caught: fix the entry, or the tree, and run again):")
        for o in no_start:
            assert o.deviation is not None
            write(f"- {o.deviation.id}: {o.note[:300]}")
    apart = [d for d in deviations if not d.counted]
    if apart:
        write("\nnot counted:")
        for d in apart:
            kind = "equivalent" if d.equivalent else "unobservable"
            write(f"- {d.id} ({d.chapter}, {kind}): {d.equivalent or d.unobservable}")


def snapshot(commit: str, destination: Path) -> Path:
    """The package, the runner and the examples as `commit` holds them, in `destination`:
    a run of a commit is not disturbed by what others change in the checkout meanwhile."""
    destination.mkdir(parents=True)
    paths = ["refimpl", "conformance", str(EXAMPLES)]
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *paths],
        cwd=REPO,
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        raise CatalogueError(f"--commit {commit}: {archive.stderr.decode(errors='replace')}")
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive.stdout, check=True)
    return destination


def write_report(path: Path, outcomes: Sequence[Outcome]) -> None:
    """The JSON report of the outcomes so far (rewritten after each deviation, so a run
    stopped midway keeps what it found and `--resume` can go on from it)."""
    report = {"figures": figures(list(outcomes)), "outcomes": [o.as_json() for o in outcomes]}
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def earlier_outcomes(path: Path, deviations: Sequence[Deviation]) -> list[Outcome]:
    """The verdicts of an earlier report (`--resume`) for these deviations: caught or
    survived only (a run that errored or whose server did not start is run again)."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
        entries = report["outcomes"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CatalogueError(f"--resume {path}: not a report of this tool ({exc})") from None
    by_id = {d.id: d for d in deviations}
    kept: list[Outcome] = []
    for entry in entries:
        deviation = by_id.get(entry.get("id", ""))
        if deviation is not None and entry.get("verdict") in (CAUGHT, SURVIVED):
            kept.append(
                Outcome(
                    deviation,
                    entry["verdict"],
                    list(entry.get("failed_examples", [])),
                    float(entry.get("seconds", 0.0)),
                    str(entry.get("note", "")),
                )
            )
    return kept


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tools/mutation/run.py",
        description="Run the conformance suite against deliberately broken copies of refimpl.",
    )
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE)
    parser.add_argument(
        "--only", action="append", default=[], metavar="ID", help="run this deviation (may repeat)"
    )
    parser.add_argument(
        "--chapter",
        action="append",
        default=[],
        help="only the deviations of this chapter (may repeat)",
    )
    parser.add_argument("--sample", type=int, help="a random sample of N deviations")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed (default 0)")
    parser.add_argument(
        "--own-chapter",
        action="store_true",
        help="run each deviation against its own chapter's examples only",
    )
    parser.add_argument(
        "--all-entries",
        action="store_true",
        help="also run the entries marked equivalent or unobservable",
    )
    parser.add_argument("--jobs", type=int, default=1, help="deviations at once (default 1)")
    parser.add_argument(
        "--runner-jobs", type=int, default=4, help="examples at once within one run (default 4)"
    )
    parser.add_argument("--nice", type=int, default=10, help="niceness of the run (default 10)")
    parser.add_argument(
        "--no-baseline", action="store_true", help="skip the run of the unmutated code"
    )
    parser.add_argument(
        "--skip-example",
        action="append",
        default=[],
        metavar="ID",
        help="an example not to run (with --no-baseline: one known to fail)",
    )
    parser.add_argument(
        "--json", type=Path, help="write every outcome here (rewritten after each deviation)"
    )
    parser.add_argument(
        "--resume",
        type=Path,
        metavar="REPORT",
        help="keep the verdicts of an earlier --json report and run only the other deviations",
    )
    parser.add_argument(
        "--every-example",
        action="store_true",
        help="run every example against each deviation (default: stop at the first failure)",
    )
    parser.add_argument(
        "--pg",
        action="store_true",
        help="speak the PostgreSQL protocol: the examples with pg steps run, and the SQL"
        " examples over it too (on by itself when an example the run takes has a pg step)",
    )
    parser.add_argument(
        "--commit",
        metavar="REV",
        help="take the code, the runner and the examples from this commit (e.g. HEAD), not"
        " from the checkout as it is: others' uncommitted work then changes nothing",
    )
    parser.add_argument(
        "--skip-stale",
        action="store_true",
        help="skip (with a warning) the selected entries whose edit no longer applies",
    )
    parser.add_argument(
        "--check", action="store_true", help="only check that every entry still applies to the code"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mutation-tree-") as folder:
        try:
            root = snapshot(args.commit, Path(folder) / "tree") if args.commit else REPO
        except CatalogueError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        return _main(args, root)


def _main(args: argparse.Namespace, root: Path) -> int:
    try:
        deviations = load(args.catalogue)
        chosen = select(deviations, args)
        # `--check` checks every entry; a run, those it runs (a stale entry elsewhere, being
        # brought in step with code changed meanwhile, does not stop it).
        stale: list[str] = []
        for deviation in deviations if args.check else chosen:
            try:
                check(deviation, root)
            except CatalogueError as exc:
                if args.check or not args.skip_stale:
                    raise
                stale.append(str(exc))
        earlier = earlier_outcomes(args.resume, chosen) if args.resume else []
    except CatalogueError as exc:
        print(f"catalogue: {exc}", file=sys.stderr)
        return 2
    if stale:
        # Code others are changing right now: those entries wait for their next run.
        print("warning: skipped, their edit no longer applies:\n- " + "\n- ".join(stale))
        chosen = [d for d in chosen if not any(m.startswith(d.id + ":") for m in stale)]
    if earlier:
        done_ids = {o.deviation.id for o in earlier if o.deviation}
        chosen = [d for d in chosen if d.id not in done_ids]
        print(f"resumed: {len(earlier)} verdict(s) kept from {args.resume}")
    counted = sum(d.counted for d in deviations)
    if args.check:
        print(f"{len(deviations)} deviations ({counted} counted): every edit applies")
        return 0
    if args.nice:
        os.nice(args.nice)
    settings = RunSettings(
        own_chapter=args.own_chapter,
        runner_jobs=args.runner_jobs,
        skipped=tuple(args.skip_example),
        pg=args.pg,
        root=root,
    )
    if not settings.pg and needs_pg(chosen, settings):
        settings = replace(settings, pg=True)
        print("--pg: on, since the examples run have pg steps")
    if args.own_chapter:
        settings = replace(settings, chapters=tuple(sorted({d.chapter for d in chosen})))
    restart_options = runner_restart_options(root)
    if not args.no_baseline:
        baseline = run_one(None, settings, restart_options)
        if baseline.verdict == NO_START or baseline.verdict == "error":
            print(
                f"the unmutated code cannot be run ({baseline.verdict}): {baseline.note}",
                file=sys.stderr,
            )
            return 2
        if baseline.failed:
            # Work in progress elsewhere: those examples tell nothing about a deviation.
            print(
                f"warning: the unmutated code fails {', '.join(baseline.failed)};"
                " they are skipped in the runs below"
            )
            settings = replace(settings, skipped=settings.skipped + tuple(baseline.failed))
        print(f"baseline: the unmutated code passes the rest ({baseline.seconds:.0f} s)")
    print(
        f"running {len(chosen)} deviation(s), {args.jobs} at a time"
        f"{', each against its own chapter' if args.own_chapter else ''}"
    )
    outcomes: list[Outcome] = list(earlier)
    lock = threading.Lock()

    # One failing example catches a deviation: the rest of its run would tell nothing more.
    caught_by = replace(settings, fail_fast=not args.every_example)

    def one(deviation: Deviation) -> Outcome:
        outcome = run_one(deviation, caught_by, restart_options)
        shown = ", ".join(outcome.failed[:3]) + ("..." if len(outcome.failed) > 3 else "")
        print(f"{deviation.id}: {outcome.verdict} ({outcome.seconds:.0f} s) {shown}", flush=True)
        with lock:
            outcomes.append(outcome)
            if args.json:
                write_report(args.json, outcomes)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(one, chosen))
    ran = {o.deviation.id for o in outcomes if o.deviation}
    print_summary(outcomes, [d for d in deviations if d.id in ran or not d.counted])
    if args.json:
        write_report(args.json, outcomes)
    survived = any(o.verdict != CAUGHT for o in outcomes if o.deviation and o.deviation.counted)
    return 1 if survived else 0


if __name__ == "__main__":
    raise SystemExit(main())

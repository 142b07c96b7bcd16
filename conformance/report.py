"""Reports of a conformance run: console progress, failure details, JUnit XML and JSON.

The console output ends with the line `N passed, N failed, N skipped`, alone on its line.
Counting: `passed` counts examples that passed; `failed` counts failures and unexpected
passes (an example the expectations file says fails, which passed); `skipped` counts
skipped examples and expected failures. A line above the summary gives the numbers of
expected failures and unexpected passes when there are any.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from conformance.results import FAILED, PASSED, SKIPPED, XFAILED, XPASSED, ExampleResult

_MARKS = {PASSED: ".", FAILED: "F", SKIPPED: "s", XFAILED: "x", XPASSED: "X"}
_SKIPS_SHOWN = 5  # ids named per skip reason
_MARKS_PER_LINE = 60


def counts(results: list[ExampleResult]) -> dict[str, int]:
    """{"passed", "failed", "skipped", "xfailed", "xpassed"} as the summary line counts them.

    `failed` includes `xpassed`; `skipped` includes `xfailed`.
    """
    by = Counter(r.outcome for r in results)
    return {
        "passed": by[PASSED],
        "failed": by[FAILED] + by[XPASSED],
        "skipped": by[SKIPPED] + by[XFAILED],
        "xfailed": by[XFAILED],
        "xpassed": by[XPASSED],
    }


def summary_line(results: list[ExampleResult]) -> str:
    """`N passed, N failed, N skipped`."""
    c = counts(results)
    return f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped"


class Progress:
    """Prints one mark per finished example (`.` F s x X), or one line each when verbose."""

    def __init__(self, total: int, stream: TextIO | None = None, verbose: bool = False) -> None:
        self.total = total
        self.stream = stream or sys.stdout
        self.verbose = verbose
        self.done = 0
        self.marks_in_line = 0

    def end_line(self) -> None:
        """End a line of marks early (with its count), so that another line may follow."""
        if self.marks_in_line:
            self.stream.write(f" {self.done}/{self.total}\n")
            self.stream.flush()
            self.marks_in_line = 0

    def __call__(self, result: ExampleResult) -> None:
        self.done += 1
        if self.verbose:
            word = result.outcome.upper()
            why = f": {result.message}" if result.outcome == SKIPPED and result.message else ""
            self.stream.write(
                f"[{self.done}/{self.total}] {word:8} {result.example.id}"
                f" ({result.duration * 1000:.0f} ms){why}\n"
            )
        else:
            self.stream.write(_MARKS.get(result.outcome, "?"))
            self.marks_in_line += 1
            if self.marks_in_line == _MARKS_PER_LINE or self.done == self.total:
                self.end_line()
        self.stream.flush()


class ChapterProgress:
    """Prints a line per spec chapter once all its examples are done, to stderr by default:
    `chapter changes: 41 passed, 0 failed, 2 skipped [120/212]` (the counts as the summary
    line counts them; in brackets the examples done of the whole run)."""

    def __init__(
        self,
        chapters: list[str],
        stream: TextIO | None = None,
        before_line: Callable[[], None] | None = None,
    ) -> None:
        self.stream = stream or sys.stderr
        self.before_line = before_line  # e.g. `Progress.end_line`: the marks on stdout
        self.left = Counter(chapters)
        self.total = len(chapters)
        self.done = 0
        self.results: dict[str, list[ExampleResult]] = {}

    def __call__(self, result: ExampleResult) -> None:
        chapter = result.example.chapter
        self.done += 1
        self.results.setdefault(chapter, []).append(result)
        self.left[chapter] -= 1
        if self.left[chapter] <= 0:
            if self.before_line:
                self.before_line()
            line = summary_line(self.results[chapter])
            self.stream.write(f"chapter {chapter}: {line} [{self.done}/{self.total}]\n")
            self.stream.flush()


def format_failure(result: ExampleResult) -> str:
    """The failure report of one example: id, place in the spec, request, message, diff."""
    ex = result.example
    title = f" ({ex.title})" if ex.title else ""
    lines = [
        f"FAILED {ex.id}{title}",
        f"  at {ex.location}",
    ]
    if result.outcome == XPASSED:
        lines.append(f"  {result.message}")
        return "\n".join(lines)
    if result.message:
        lines.append(f"  {result.message}")
    if result.note:
        lines.append(f"  ({result.note})")
    if result.request:
        lines.append("  request:")
        lines.extend("    " + line for line in result.request.splitlines())
    if result.diff:
        lines.append("  diff (expected -> actual):")
        lines.extend("    " + line for line in result.diff.splitlines())
    return "\n".join(lines)


def print_report(results: list[ExampleResult], stream: TextIO | None = None) -> None:
    """Failure details, the skips by reason, the runner's notes (examples run alone),
    expected failures, and the summary line last."""
    out = stream or sys.stdout
    failures = [r for r in results if r.outcome in (FAILED, XPASSED)]
    if failures:
        out.write("\n")
        for result in failures:
            out.write(format_failure(result) + "\n\n")
    reasons: dict[str, list[str]] = {}
    for result in results:
        if result.outcome == SKIPPED:
            reasons.setdefault(result.message or "skipped", []).append(result.example.id)
    for reason, ids in reasons.items():
        shown = ", ".join(ids[:_SKIPS_SHOWN]) + (", ..." if len(ids) > _SKIPS_SHOWN else "")
        out.write(f"skipped {len(ids)}: {reason} ({shown})\n")
    notes: dict[str, list[str]] = {}
    for result in results:
        if result.note:
            notes.setdefault(result.note, []).append(result.example.id)
    for note, ids in notes.items():
        out.write(f"note, {len(ids)} example(s): {note} ({', '.join(ids)})\n")
    c = counts(results)
    if c["xfailed"] or c["xpassed"]:
        out.write(
            f"{c['xfailed']} expected failure(s) (counted as skipped),"
            f" {c['xpassed']} unexpected pass(es) (counted as failed)\n"
        )
    out.write(summary_line(results) + "\n")
    out.flush()


def write_junit(results: list[ExampleResult], path: Path | str) -> None:
    """A JUnit XML file: one testsuite per spec chapter, one testcase per example."""
    root = ET.Element("testsuites", name="conformance")
    by_chapter: dict[str, list[ExampleResult]] = {}
    for result in results:
        by_chapter.setdefault(result.example.chapter, []).append(result)
    for chapter, items in by_chapter.items():
        c = Counter(r.outcome for r in items)
        suite = ET.SubElement(
            root,
            "testsuite",
            name=f"spec.{chapter}",
            tests=str(len(items)),
            failures=str(c[FAILED] + c[XPASSED]),
            errors="0",
            skipped=str(c[SKIPPED] + c[XFAILED]),
            time=f"{sum(r.duration for r in items):.3f}",
        )
        for result in items:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"spec.{chapter}",
                name=result.example.id,
                file=result.example.source,
                line=str(result.example.lines[0]),
                time=f"{result.duration:.3f}",
            )
            if result.outcome in (FAILED, XPASSED):
                failure = ET.SubElement(case, "failure", message=result.message[:500])
                failure.text = format_failure(result)
            elif result.outcome == SKIPPED:
                ET.SubElement(case, "skipped", message=result.message[:500])
            elif result.outcome == XFAILED:
                ET.SubElement(case, "skipped", message=f"expected failure: {result.reason}")
            if result.note:
                ET.SubElement(case, "system-out").text = result.note
    ET.indent(root)
    Path(path).write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a report records of the run itself: which runner, when, for how long."""

    runner_version: str = ""
    started_at: str = ""  # ISO 8601, UTC
    duration_s: float = 0.0


def results_json(
    results: list[ExampleResult], base_url: str = "", run: RunInfo | None = None
) -> dict[str, Any]:
    """The JSON report as a dict: the target (`base_url`), the run (`runner_version`,
    `started_at`, `duration_s`), `summary` (the counts) and `results` (one per example)."""
    info = run or RunInfo()
    return {
        "base_url": base_url,
        "runner_version": info.runner_version,
        "started_at": info.started_at,
        "duration_s": round(info.duration_s, 3),
        "summary": counts(results),
        "results": [
            {
                "id": r.example.id,
                "source": r.example.source,
                "lines": list(r.example.lines),
                "title": r.example.title,
                "outcome": r.outcome,
                "verdict": r.verdict,
                "duration": round(r.duration, 4),
                "message": r.message,
                "reason": r.reason,
                "note": r.note,
                "request": r.request,
                "diff": r.diff,
            }
            for r in results
        ],
    }


def failed_ids(path: Path | str) -> list[str]:
    """The ids a JSON report (`--json`) lists as failed (unexpected passes included), in its
    order; `ValueError` when the file is no such report."""
    try:
        report = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a JSON report of refimpl conform: {exc}") from None
    entries = report.get("results") if isinstance(report, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path} is not a JSON report of refimpl conform (no 'results' list)")
    return [
        entry["id"]
        for entry in entries
        if isinstance(entry, dict)
        and isinstance(entry.get("id"), str)
        and entry.get("outcome") in (FAILED, XPASSED)
    ]


def write_json(
    results: list[ExampleResult], path: Path | str, base_url: str = "", run: RunInfo | None = None
) -> None:
    """Write `results_json` to `path`."""
    Path(path).write_text(
        json.dumps(results_json(results, base_url, run), indent=2, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )

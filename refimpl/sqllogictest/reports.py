"""The machine-readable reports of `refimpl sqllogictest`: JSON (`--json`, read back by
`--rerun-failed`) and JUnit XML (`--junit`), one entry per script file.

A file *fails* when it fails any record, or, with `--min-rate`, when it passes fewer of its
records than that; the JSON report records which, with the runner's version, when the run
started and how long it took.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refimpl.sqllogictest.runner import FileResult


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a report records of the run itself."""

    target: str
    runner_version: str
    started_at: str  # ISO 8601, UTC
    duration_s: float


def file_failed(result: FileResult, min_rate: float | None) -> bool:
    """Whether a file counts as failed: below `min_rate` percent, or any failure without it."""
    if min_rate is not None:
        return 100 * result.rate < min_rate
    return result.failed > 0


def write_json(path: Path, results: list[FileResult], run: RunInfo, min_rate: float | None) -> None:
    """The JSON report: the run, then one entry per file with its counts and failures."""
    document: dict[str, Any] = {
        "target": run.target,
        "runner_version": run.runner_version,
        "started_at": run.started_at,
        "duration_s": round(run.duration_s, 3),
        "files": [
            {
                "path": str(result.path),
                "outcome": "failed" if file_failed(result, min_rate) else "passed",
                "passed": result.passed,
                "failed": result.failed,
                "skipped": result.skipped,
                "rate": round(result.rate, 6),
                "halted_at": result.halted_at,
                "failures": [
                    {
                        "line": f.line,
                        "kind": f.kind,
                        "sql": f.sql,
                        "expected": f.expected,
                        "got": f.got,
                    }
                    for f in result.failures
                ],
            }
            for result in results
        ],
    }
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_junit(path: Path, results: list[FileResult], min_rate: float | None) -> None:
    """One testsuite, one testcase per file; a failed file carries its first failures."""
    failed = [r for r in results if file_failed(r, min_rate)]
    root = ET.Element("testsuites", name="sqllogictest")
    suite = ET.SubElement(
        root,
        "testsuite",
        name="sqllogictest",
        tests=str(len(results)),
        failures=str(len(failed)),
        errors="0",
        skipped="0",
    )
    for result in results:
        case = ET.SubElement(suite, "testcase", classname="sqllogictest", name=str(result.path))
        if result in failed:
            failure = ET.SubElement(
                case,
                "failure",
                message=f"{result.passed} passed, {result.failed} failed"
                f" ({100 * result.rate:.2f}%)",
            )
            failure.text = "\n".join(
                f"line {f.line} [{f.kind}]: {f.sql}\n  expected: {f.expected}\n  got: {f.got}"
                for f in result.failures[:20]
            )
    ET.indent(root)
    path.write_bytes(ET.tostring(root, encoding="utf-8", xml_declaration=True))


def failed_files(path: Path) -> list[Path]:
    """The files a JSON report lists as failed; `ValueError` when it is no such report."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not a JSON report of refimpl sqllogictest: {exc}") from None
    files = document.get("files") if isinstance(document, dict) else None
    if not isinstance(files, list):
        raise ValueError(f"{path} is not a JSON report of refimpl sqllogictest (no 'files')")
    return [
        Path(entry["path"])
        for entry in files
        if isinstance(entry, dict)
        and isinstance(entry.get("path"), str)
        and entry.get("outcome") == "failed"
    ]

"""Known outcomes an implementation declares for examples (expected FAIL, SKIP)."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from conformance.results import FAILED, PASSED, XFAILED, XPASSED, ExampleResult


@dataclass
class Expectation:
    """A declared known outcome of an example: `FAIL` (expected to fail) or `SKIP`."""

    pattern: str
    outcome: str
    reason: str


def load_expectations(path: Path | str) -> list[Expectation]:
    """An expectations file: lines `<id or glob> FAIL|SKIP <reason>`, `#` comments.

    A `.json` file may instead hold a list of `{"id", "expect": "FAIL"|"SKIP", "reason"}`.
    Raises ValueError for a malformed line.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    items: list[Expectation] = []
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, dict):
            data = data.get("expectations", [])
        for entry in data:
            outcome = str(entry.get("expect", "FAIL")).upper()
            if outcome not in ("FAIL", "SKIP"):
                raise ValueError(f"{path}: expect must be FAIL or SKIP, not {outcome!r}")
            items.append(Expectation(entry["id"], outcome, entry.get("reason", "")))
        return items
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or parts[1].upper() not in ("FAIL", "SKIP"):
            raise ValueError(f"{path}:{number}: write '<id> FAIL <reason>' or '<id> SKIP <reason>'")
        items.append(Expectation(parts[0], parts[1].upper(), parts[2] if len(parts) > 2 else ""))
    return items


def load_skip_file(path: Path | str) -> list[Expectation]:
    """A skip file: one id or glob a line, optionally followed by a reason; `#` comments."""
    items = []
    for raw in Path(path).read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 1)
        items.append(Expectation(parts[0], "SKIP", parts[1] if len(parts) > 1 else "skip file"))
    return items


def id_matches(pattern: str, example_id: str) -> bool:
    """A glob (`*`, `?`, `[...]`) matches the whole id; a plain word matches ids containing it."""
    if any(ch in pattern for ch in "*?["):
        return fnmatch.fnmatchcase(example_id, pattern)
    return pattern in example_id


def find_expectation(example_id: str, expectations: Iterable[Expectation]) -> Expectation | None:
    """The first expectation whose pattern is the id, else the first glob that matches it."""
    items = list(expectations)
    for item in items:
        if item.pattern == example_id:
            return item
    for item in items:
        if any(ch in item.pattern for ch in "*?[") and fnmatch.fnmatchcase(
            example_id, item.pattern
        ):
            return item
    return None


def apply_expectation(result: ExampleResult, expectation: Expectation | None) -> ExampleResult:
    """Set `result.outcome` from a FAIL expectation (SKIP is handled before running)."""
    if expectation is None or expectation.outcome != "FAIL":
        result.outcome = result.verdict
        return result
    result.reason = expectation.reason
    if result.verdict == FAILED:
        result.outcome = XFAILED
    elif result.verdict == PASSED:
        result.outcome = XPASSED
        result.message = (
            f"expected to fail ({expectation.reason or 'no reason given'}) but passed;"
            " remove it from the expectations file"
        )
    else:
        result.outcome = result.verdict
    return result

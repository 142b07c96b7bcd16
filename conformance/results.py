"""Verdicts: what happened to one example, in the words every report uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from conformance.cases import Example

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
XFAILED, XPASSED = "xfailed", "xpassed"


@dataclass
class ExampleResult:
    """What happened to one example.

    `verdict` is what the run itself found (passed, failed, skipped); `outcome` the final
    word after the expectations file (also xfailed: failed as expected, and xpassed: passed
    although expected to fail, which counts as a failure). `diff` is a unified diff of
    expected and actual; `request` the request that showed the failure; `updates` what a
    `--update` would write back (one entry per record or step that did not match); `note`
    what the runner says of how it ran the example (that it ran alone, and why).
    """

    example: Example
    verdict: str
    outcome: str = ""
    message: str = ""
    diff: str = ""
    request: str = ""
    duration: float = 0.0
    reason: str = ""
    database: str = ""
    uniq: str = ""
    note: str = ""
    updates: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.outcome:
            self.outcome = self.verdict

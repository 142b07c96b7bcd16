"""What an HTTP example's steps share, and how an answer is checked against a step's `expect`.

`HttpRun` holds one example's captures, result, background requests and protocol sessions;
`check_answer` matches an answer with a step's `expect` (status, content type, headers,
body, JSON, CSV, server-sent events, raw frames) and keeps its captures; `check_pending`
checks that a background request has not answered yet.
"""

from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass, field
from typing import Any

import requests

from conformance.matchers import match
from conformance.payloads import (
    for_display,
    json_diff,
    parse_frames,
    parse_sse,
    resolve_path,
    substitute,
    unsubstitute,
)
from conformance.pg_session import PgConnection
from conformance.results import ExampleResult
from conformance.transport import Background, Response, StepFailure

SUCCESS_STATUS = {"$match": "int", "ge": 200, "lt": 300}
DEFAULT_PENDING_MS = 500.0


@dataclass
class HttpRun:
    """What the steps of one HTTP example share: captures, results, open backgrounds."""

    session: requests.Session
    database: str
    variables: dict[str, Any]
    result: ExampleResult
    backgrounds: dict[str, Background] = field(default_factory=dict)
    pg_sessions: dict[str, PgConnection] = field(default_factory=dict)


def check_answer(
    run: HttpRun, step: dict[str, Any], response: Response, where: str, index: int, shown: str
) -> None:
    """Match an answer against the step's `expect` and keep its `capture`s."""
    variables = run.variables
    expect = substitute(step.get("expect", {}), variables)
    expected_view, actual_view = expectation_views(expect, response)
    outcome = match(expected_view, actual_view, variables)
    if not outcome.ok:
        names = {"db": run.database, "uniq": variables["uniq"]}
        run.result.updates.append(
            {
                "kind": "http-step",
                "index": index - 1,
                "expect": unsubstitute(
                    expect_from_view(step.get("expect", {}), outcome.update_view), names
                ),
            }
        )
        raise StepFailure(
            f"{where}: " + "; ".join(outcome.mismatches[:8]),
            json_diff(outcome.expected_view, actual_view),
            shown,
        )
    root = response.root()
    for name, path in step.get("capture", {}).items():
        try:
            variables[name] = resolve_path(root, path)
        except KeyError:
            raise StepFailure(
                f"{where}: capture {name!r}: nothing at {path} in the answer",
                json_diff({"capture": path}, for_display(root.get("json"))),
                shown,
            ) from None


def check_pending(step: dict[str, Any], background: Background, where: str) -> None:
    """Pass when the background request is still without an answer after `for_ms`."""
    wait_ms = float(step.get("for_ms", DEFAULT_PENDING_MS))
    if background.wait(wait_ms / 1000.0):
        answered = (background.answered_at or time.monotonic()) - background.started_at
        what = f"HTTP {background.answer.status}" if background.answer else background.error
        raise StepFailure(
            f"{where}: the background request {step['pending']!r} answered ({what})"
            f" {answered * 1000:.0f} ms after it was sent; it should still be waiting"
            f" {wait_ms:g} ms into this step",
            request=background.request.describe(),
        )


# ---------------------------------------------------------------------------------------
# HTTP expectation views
# ---------------------------------------------------------------------------------------


def expectation_views(expect: dict[str, Any], response: Response) -> tuple[dict, dict]:
    """(expected, actual) objects for one `match` call covering every expected part."""
    expected: dict[str, Any] = {"status": expect.get("status", SUCCESS_STATUS)}
    actual: dict[str, Any] = {"status": response.status}
    if "content_type" in expect:
        expected["content_type"] = str(expect["content_type"]).lower()
        actual["content_type"] = response.content_type
    if "headers" in expect:
        wanted = {str(k).lower(): v for k, v in expect["headers"].items()}
        expected["headers"] = wanted
        actual["headers"] = {k: response.headers[k] for k in wanted if k in response.headers}
    if "absent_headers" in expect:
        names = [str(n).lower() for n in expect["absent_headers"]]
        expected["absent_headers"] = names
        actual["absent_headers"] = [n for n in names if n not in response.headers]
    if "body" in expect:
        expected["body"] = expect["body"]
        actual["body"] = response.body
    if "json" in expect:
        expected["json"] = expect["json"]
        actual["json"] = response.json()
    if "csv" in expect:
        expected["csv"] = expect["csv"]
        actual["csv"] = list(csv.reader(io.StringIO(response.body, newline="")))
    if "sse" in expect:
        expected["sse"] = expect["sse"]
        actual["sse"] = parse_sse(response.body)
    if "frames" in expect:
        expected["frames"] = expect["frames"]
        actual["frames"] = parse_frames(response.body, response.arrivals)
    return expected, actual


def expect_from_view(original: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in view.items():
        if key == "status" and "status" not in original and value == SUCCESS_STATUS:
            continue
        if key == "absent_headers":
            out[key] = original.get(key, value)
            continue
        out[key] = value
    return out

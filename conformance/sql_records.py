"""SQL records: what a server answered, in the form of the record that expected it."""

from __future__ import annotations

import re
from typing import Any

from conformance.cases import render_row


def actual_record(expected: dict[str, Any], status: int, payload: Any, body: str) -> dict[str, Any]:
    """What the server answered to a record's SQL, as a record of the same form.

    A 2xx answer with `columns` is a `query` record, other 2xx answers `statement ok` with
    the answer's `message`, and an error answer `statement error` with the error text in
    `message` and `status` set.
    """
    sql = expected["sql"]
    if isinstance(payload, dict) and 200 <= status < 300:
        columns = payload.get("columns")
        if isinstance(columns, list):
            dataset = payload.get("dataset") or []
            record: dict[str, Any] = {
                "type": "query",
                "columns": [
                    {"name": str(c.get("name")), "type": str(c.get("type"))}
                    if isinstance(c, dict)
                    else {"name": str(c), "type": "?"}
                    for c in columns
                ],
                "sort": expected.get("sort", "nosort"),
                "sql": sql,
                "rows": [render_row(row) for row in dataset if isinstance(row, list)],
            }
            if payload.get("count") != len(dataset):
                record["count_problem"] = (
                    f"count is {payload.get('count')!r} but the dataset has {len(dataset)} row(s)"
                )
            return record
        return {
            "type": "statement",
            "expect": "ok",
            "sql": sql,
            "message": payload.get("message"),
        }
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return {
            "type": "statement",
            "expect": "error",
            "sql": sql,
            "message": payload["error"],
            "status": status,
        }
    return {
        "type": "statement",
        "expect": "error",
        "sql": sql,
        "message": f"HTTP {status}, not a JSON answer: {body[:200]!r}",
        "status": status,
    }


def compare_records(expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """None when `actual` satisfies `expected`, else one sentence saying what differs."""
    if expected["type"] == "query":
        if actual["type"] != "query":
            if actual.get("expect") == "error":
                return f"expected rows, got an error: {actual.get('message')}"
            return f"expected rows, got a message: {actual.get('message')!r}"
        if actual["columns"] != expected["columns"]:
            return "the columns differ"
        exp_rows, act_rows = expected["rows"], actual["rows"]
        if expected.get("sort") == "rowsort":
            exp_rows, act_rows = sorted(exp_rows), sorted(act_rows)
        if exp_rows != act_rows:
            return "the rows differ"
        if actual.get("count_problem"):
            return actual["count_problem"]
        return None
    if expected["expect"] == "ok":
        if actual["type"] == "statement" and actual["expect"] == "error":
            return f"expected success, got an error: {actual.get('message')}"
        if "message" in expected:
            if actual["type"] == "query":
                return "expected a message, got rows"
            if actual.get("message") != expected["message"]:
                return f"the message is {actual.get('message')!r}"
        return None
    if not (actual["type"] == "statement" and actual["expect"] == "error"):
        return "expected an error, but the statement succeeded"
    status = actual.get("status", 0)
    if not 400 <= status < 500:
        return f"expected a 4xx error, got HTTP {status}"
    message = actual.get("message") or ""
    pattern = expected.get("pattern")
    if pattern and not re.search(pattern, message):
        return f"the error {message!r} does not match /{pattern}/"
    if "message" in expected and message != expected["message"]:
        return f"the error is {message!r}"
    return None


def sorted_record(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("type") == "query" and record.get("sort") == "rowsort":
        return {**record, "rows": sorted(record["rows"])}
    if record.get("type") == "statement" and record.get("expect") == "error":
        shown = dict(record)
        if "pattern" not in shown and "message" in shown:
            shown = {**shown, "pattern": None}
        return shown
    return record


def updated_record(expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
    """The record `--update` writes: the actual answer in the expected record's form."""
    base = {
        "sql": expected["sql"],
        "line": expected.get("line"),
        "end_line": expected.get("end_line"),
    }
    if actual["type"] == "query":
        rows = actual["rows"]
        if expected.get("sort") == "rowsort":
            rows = sorted(rows)
        return {
            **base,
            "type": "query",
            "columns": actual["columns"],
            "sort": expected.get("sort", "nosort"),
            "rows": rows,
        }
    if actual["expect"] == "ok":
        record = {**base, "type": "statement", "expect": "ok"}
        keep_message = expected.get("type") != "statement" or "message" in expected
        if actual.get("message") is not None and keep_message:
            record["message"] = actual["message"]
        return record
    record = {**base, "type": "statement", "expect": "error"}
    pattern = expected.get("pattern")
    message = actual.get("message") or ""
    if not pattern or not re.search(pattern, message):
        pattern = re.escape(message[:60]).replace("\\ ", " ")
    record["pattern"] = pattern
    if "message" in expected:
        record["message"] = message
    return record

"""Runs examples over HTTP against a base URL and gives a verdict for each.

Nothing here knows the implementation under test: it speaks HTTP through `requests` and
imports nothing from `refimpl`. For each example the runner

1. skips it when it `needs` a database the server does not have (asked once per name),
2. creates a fresh database `conf_<uniq>` with `CREATE DATABASE` through `POST /exec` on the
   database `demo`, as the admin; an example that `needs` databases runs in the first of
   them instead (such as `sample`, which `refimpl serve --sample` makes), which it shares
   with other examples and so only reads,
3. runs the example's `setup` statements and then its records or steps, adding
   `db=<that database>` to every request whose query does not name `db` itself,
4. drops the fresh database again (also after a failure).

`{{db}}` is the example's database, `{{uniq}}` its unique suffix (for user names),
`{{admin_token}}` the admin token, and `{{name}}` any value captured by an earlier step.

`Runner.run(example)` never raises for anything the server does; a broken case file raises
`CaseError` when loaded, not here.
"""

from __future__ import annotations

import csv
import difflib
import fnmatch
import io
import json
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from conformance.cases import Example, render_row, render_sql_record
from conformance.matchers import MatcherError, match

ADMIN_DATABASE = "demo"
DB_PREFIX = "conf_"
_PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PATH_TOKEN_RE = re.compile(r"\.([A-Za-z_][\w-]*)|\[(-?\d+)\]|\[\"([^\"]*)\"\]")
_SUCCESS_STATUS = {"$match": "int", "ge": 200, "lt": 300}

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
XFAILED, XPASSED = "xfailed", "xpassed"


class SubstitutionError(KeyError):
    """A `{{name}}` with nothing captured under that name."""


@dataclass(frozen=True)
class RunOptions:
    """How to reach the server. `token` is the admin token (None: send no credentials)."""

    base_url: str
    token: str | None = None
    timeout: float = 30.0
    admin_database: str = ADMIN_DATABASE


@dataclass
class Expectation:
    """A declared known outcome of an example: `FAIL` (expected to fail) or `SKIP`."""

    pattern: str
    outcome: str
    reason: str


@dataclass
class ExampleResult:
    """What happened to one example.

    `verdict` is what the run itself found (passed, failed, skipped); `outcome` the final
    word after the expectations file (also xfailed: failed as expected, and xpassed: passed
    although expected to fail, which counts as a failure). `diff` is a unified diff of
    expected and actual; `request` the request that showed the failure; `updates` what a
    `--update` would write back (one entry per record or step that did not match).
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
    updates: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.outcome:
            self.outcome = self.verdict


@dataclass
class _Response:
    status: int
    headers: dict[str, str]
    body: str
    content_type: str
    error: str = ""

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return self.body

    def root(self) -> dict[str, Any]:
        """The object captures address: `$.status`, `$.headers.x`, `$.json...`, `$.sse[0]`."""
        root: dict[str, Any] = {
            "status": self.status,
            "headers": self.headers,
            "body": self.body,
            "json": self.json(),
        }
        if self.content_type == "text/event-stream":
            root["sse"] = parse_sse(self.body)
        return root


class _StepFailure(Exception):
    def __init__(self, message: str, diff: str = "", request: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.diff = diff
        self.request = request


# ---------------------------------------------------------------------------------------
# Helpers a caller may use on their own
# ---------------------------------------------------------------------------------------


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """Replace `{{name}}` in every string (and object key) of `value`.

    A string that is exactly one placeholder becomes the captured value itself (a number
    stays a number); a placeholder inside longer text is replaced by its text. Raises
    SubstitutionError for an unknown name.
    """
    if isinstance(value, str):
        whole = _PLACEHOLDER_RE.fullmatch(value)
        if whole:
            return _lookup(whole.group(1), variables)
        return _PLACEHOLDER_RE.sub(lambda m: _as_text(_lookup(m.group(1), variables)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    return value


def _lookup(name: str, variables: dict[str, Any]) -> Any:
    if name not in variables:
        raise SubstitutionError(name)
    return variables[name]


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def unsubstitute(value: Any, variables: dict[str, str]) -> Any:
    """The inverse for `--update`: write `{{name}}` where a variable's text appears."""
    if isinstance(value, str):
        for name, text in variables.items():
            if text:
                value = value.replace(text, "{{" + name + "}}")
        return value
    if isinstance(value, list):
        return [unsubstitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {unsubstitute(k, variables): unsubstitute(v, variables) for k, v in value.items()}
    return value


def resolve_path(root: Any, path: str) -> Any:
    """`$.json.dataset[0][0]` in `root`; KeyError when the path leads nowhere."""
    if not path.startswith("$"):
        raise KeyError(path)
    rest = path[1:]
    value = root
    pos = 0
    while pos < len(rest):
        m = _PATH_TOKEN_RE.match(rest, pos)
        if not m:
            raise KeyError(path)
        pos = m.end()
        key = m.group(1) if m.group(1) is not None else m.group(3)
        if key is not None:
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, dict) and key.lower() in value:
                value = value[key.lower()]
            else:
                raise KeyError(path)
        else:
            index = int(m.group(2))
            if not isinstance(value, list) or not -len(value) <= index < len(value):
                raise KeyError(path)
            value = value[index]
    return value


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Server-sent events of a `text/event-stream` body, as a list of event objects.

    Each block (lines up to a blank line) with at least one field becomes an object with
    the fields it had: `event` (`message` when the block has data but no event name), `id`,
    `data` (lines joined with newlines, then parsed as JSON when it parses) and `retry`
    (an integer). Comment lines (starting with `:`) are not events. An unfinished last
    block is dropped, as a browser would.
    """
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    data_lines: list[str] = []
    lines = re.split(r"\r\n|\r|\n", text)
    complete = len(lines) - 1  # the text after the last line break is not a finished line
    for i, line in enumerate(lines):
        if i >= complete:
            break
        if line == "":
            if current or data_lines:
                events.append(_finish_event(current, data_lines))
            current, data_lines = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            current["event"] = value
        elif name == "id":
            current["id"] = value
        elif name == "retry":
            current["retry"] = int(value) if value.isdigit() else value
    return events


def _finish_event(fields: dict[str, Any], data_lines: list[str]) -> dict[str, Any]:
    event: dict[str, Any] = {}
    if "event" in fields or data_lines:
        event["event"] = fields.get("event", "message")
    if "id" in fields:
        event["id"] = fields["id"]
    if data_lines:
        raw = "\n".join(data_lines)
        try:
            event["data"] = json.loads(raw)
        except ValueError:
            event["data"] = raw
    if "retry" in fields:
        event["retry"] = fields["retry"]
    return event


def json_diff(expected: Any, actual: Any) -> str:
    """A unified diff of two JSON values, pretty-printed; multi-line strings split in lines."""
    left = json.dumps(_for_display(expected), indent=2, ensure_ascii=False).splitlines()
    right = json.dumps(_for_display(actual), indent=2, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(left, right, "expected", "actual", lineterm="", n=3))


def text_diff(expected: str, actual: str) -> str:
    """A unified diff of two texts."""
    return "\n".join(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "expected", "actual", lineterm=""
        )
    )


def _for_display(value: Any) -> Any:
    if isinstance(value, str) and "\n" in value:
        return value.splitlines(keepends=True)
    if isinstance(value, list):
        return [_for_display(v) for v in value]
    if isinstance(value, dict):
        return {k: _for_display(v) for k, v in value.items()}
    return value


# ---------------------------------------------------------------------------------------
# Expectations and selection
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# The runner
# ---------------------------------------------------------------------------------------


class Runner:
    """Runs examples against one server. Thread-safe: `run` may be called from many threads."""

    def __init__(self, options: RunOptions) -> None:
        self.options = options
        self._base = options.base_url.rstrip("/")
        self._databases: dict[str, bool] = {}
        self._lock = threading.Lock()

    # -- public ----------------------------------------------------------------------------

    def run(self, example: Example) -> ExampleResult:
        """Run one example in a fresh database (or the one it needs); never raises."""
        started = time.monotonic()
        for need in example.needs:
            if not self._has_database(need):
                return ExampleResult(
                    example,
                    SKIPPED,
                    message=f"needs database '{need}', which the server does not have",
                )
        uniq = secrets.token_hex(4)
        # An example that needs a database runs in it (and must leave it as it found it).
        fresh = not example.needs
        database = DB_PREFIX + uniq if fresh else example.needs[0]
        session = requests.Session()
        variables: dict[str, Any] = {
            "db": database,
            "uniq": uniq,
            "admin_token": self.options.token or "",
        }
        result = ExampleResult(example, PASSED, database=database, uniq=uniq)
        try:
            if fresh:
                created = self._admin_exec(session, f"CREATE DATABASE {database}")
                if created.status != 200:
                    raise _StepFailure(
                        f"could not create the example's database {database}:"
                        f" HTTP {created.status} {created.body[:300]}",
                        request=f"POST /exec?db={self.options.admin_database}",
                    )
            try:
                self._run_setup(session, example, database, variables)
                if example.kind == "sql":
                    self._run_sql(session, example, database, variables, result)
                else:
                    self._run_http(session, example, database, variables, result)
            finally:
                if fresh:
                    self._admin_exec(session, f"DROP DATABASE {database}")
        except _StepFailure as failure:
            result.verdict = result.outcome = FAILED
            result.message = failure.message
            result.diff = failure.diff
            result.request = failure.request
        except (MatcherError, SubstitutionError) as exc:
            result.verdict = result.outcome = FAILED
            result.message = f"the example itself is broken: {type(exc).__name__}: {exc}"
        except requests.RequestException as exc:
            result.verdict = result.outcome = FAILED
            result.message = f"HTTP request failed: {exc}"
        finally:
            session.close()
            result.duration = time.monotonic() - started
        return result

    def run_all(
        self,
        examples: list[Example],
        jobs: int = 8,
        expectations: Iterable[Expectation] = (),
        on_result: Callable[[ExampleResult], None] | None = None,
    ) -> list[ExampleResult]:
        """Run examples in parallel; results come back in the examples' order.

        An example whose expectation is SKIP is not run. `on_result` is called (from one
        thread at a time) as each result is ready, for progress output.
        """
        rules = list(expectations)
        results: dict[int, ExampleResult] = {}
        pending: list[tuple[int, Example, Expectation | None]] = []
        report_lock = threading.Lock()

        def finish(index: int, result: ExampleResult) -> None:
            with report_lock:
                results[index] = result
                if on_result:
                    on_result(result)

        for index, example in enumerate(examples):
            rule = find_expectation(example.id, rules)
            if rule is not None and rule.outcome == "SKIP":
                finish(index, ExampleResult(example, SKIPPED, message=rule.reason or "skipped"))
            else:
                pending.append((index, example, rule))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {
                pool.submit(self.run, example): (index, rule) for index, example, rule in pending
            }
            for future in as_completed(futures):
                index, rule = futures[future]
                finish(index, apply_expectation(future.result(), rule))
        return [results[i] for i in sorted(results)]

    # -- plumbing --------------------------------------------------------------------------

    def _has_database(self, name: str) -> bool:
        with self._lock:
            if name in self._databases:
                return self._databases[name]
        with requests.Session() as session:
            response = self._send(
                session,
                "GET",
                "/exec",
                params=[("db", name), ("query", "SHOW TABLES")],
                headers=self._auth_headers("admin", {}),
            )
        present = response.status == 200
        with self._lock:
            self._databases[name] = present
        return present

    def _auth_headers(self, auth: str, variables: dict[str, Any]) -> dict[str, str]:
        if auth == "none":
            return {}
        if auth == "admin":
            token = self.options.token
        elif auth in variables:
            token = _as_text(variables[auth])
        else:
            token = _as_text(substitute(auth, variables))
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _admin_exec(self, session: requests.Session, sql: str) -> _Response:
        return self._exec(session, self.options.admin_database, sql)

    def _exec(
        self, session: requests.Session, database: str, sql: str, auth: str = "admin"
    ) -> _Response:
        return self._send(
            session,
            "POST",
            "/exec",
            params=[("db", database)],
            headers={"Content-Type": "text/plain; charset=utf-8", **self._auth_headers(auth, {})},
            data=sql.encode("utf-8"),
        )

    def _send(
        self,
        session: requests.Session,
        method: str,
        path: str,
        *,
        params: list[tuple[str, str]],
        headers: dict[str, str],
        data: Any = None,
        json_body: Any = None,
        read: dict[str, Any] | None = None,
    ) -> _Response:
        url = self._base + path
        read_timeout = float(read.get("timeout", self.options.timeout)) if read else None
        try:
            response = session.request(
                method,
                url,
                params=params,
                headers=headers,
                data=data,
                json=json_body,
                timeout=(self.options.timeout, read_timeout or self.options.timeout),
                stream=True,
                allow_redirects=False,
            )
        except requests.RequestException as exc:
            query = "&".join(f"{k}={v}" for k, v in params)
            if isinstance(data, bytes):
                shown = data.decode("utf-8", "replace")
            elif json_body is not None:
                shown = json.dumps(json_body, ensure_ascii=False)
            else:
                shown = str(data or "")
            raise _StepFailure(
                f"HTTP request failed: {exc}",
                request=_describe_request(method, f"{path}?{query}", shown, headers),
            ) from None
        try:
            content_type = response.headers.get("Content-Type", "")
            media = content_type.split(";")[0].strip().lower()
            if media == "text/event-stream" or read:
                body = _read_stream(response, read or {}, self.options.timeout)
            else:
                body = response.content.decode(response.encoding or "utf-8", "replace")
            return _Response(
                status=response.status_code,
                headers={k.lower(): v for k, v in response.headers.items()},
                body=body,
                content_type=media,
            )
        finally:
            response.close()

    def _run_setup(
        self,
        session: requests.Session,
        example: Example,
        database: str,
        variables: dict[str, Any],
    ) -> None:
        for n, statement in enumerate(example.data.get("setup", []), 1):
            sql = substitute(statement, variables)
            response = self._exec(session, database, sql)
            if response.status != 200:
                raise _StepFailure(
                    f"setup statement {n} failed: HTTP {response.status} {response.body[:300]}",
                    request=_describe_request("POST", f"/exec?db={database}", sql),
                )

    # -- SQL examples ----------------------------------------------------------------------

    def _run_sql(
        self,
        session: requests.Session,
        example: Example,
        database: str,
        variables: dict[str, Any],
        result: ExampleResult,
    ) -> None:
        failures: list[str] = []
        diffs: list[str] = []
        first_request = ""
        for index, record in enumerate(example.data["records"]):
            expected = substitute(record, variables)
            response = self._exec(session, database, expected["sql"])
            actual = actual_record(expected, response.status, response.json(), response.body)
            problem = compare_records(expected, actual)
            if problem is None:
                continue
            where = f"{example.source}:{record.get('line', '?')}"
            failures.append(f"{where}: {problem}")
            shown_expected = _sorted_record(expected)
            shown_actual = _sorted_record(actual)
            diffs.append(
                f"@ {where}\n"
                + text_diff(render_sql_record(shown_expected), render_sql_record(shown_actual))
            )
            if not first_request:
                first_request = _describe_request("POST", f"/exec?db={database}", expected["sql"])
            names = {"db": database, "uniq": variables["uniq"]}
            result.updates.append(
                {
                    "kind": "sql-record",
                    "index": index,
                    "record": unsubstitute(_updated_record(record, actual), names),
                }
            )
        if failures:
            raise _StepFailure("; ".join(failures), "\n".join(diffs), first_request)

    # -- HTTP examples ---------------------------------------------------------------------

    def _run_http(
        self,
        session: requests.Session,
        example: Example,
        database: str,
        variables: dict[str, Any],
        result: ExampleResult,
    ) -> None:
        for index, step in enumerate(example.data["steps"], 1):
            request = substitute(step["request"], variables)
            params = _query_params(request.get("query", {}), database)
            headers = {str(k): _as_text(v) for k, v in request.get("headers", {}).items()}
            headers.update(self._auth_headers(step["request"].get("auth", "admin"), variables))
            data: Any = None
            json_body: Any = None
            shown_body = ""
            if "body" in request:
                data = _as_text(request["body"]).encode("utf-8")
                shown_body = _as_text(request["body"])
            elif "json" in request:
                json_body = request["json"]
                shown_body = json.dumps(json_body, ensure_ascii=False)
            elif "form" in request:
                data = {k: _as_text(v) for k, v in request["form"].items()}
                shown_body = "&".join(f"{k}={v}" for k, v in data.items())
            query_text = "&".join(f"{k}={v}" for k, v in params)
            shown = _describe_request(
                request["method"],
                request["path"] + (f"?{query_text}" if query_text else ""),
                shown_body,
                headers,
            )
            response = self._send(
                session,
                request["method"],
                request["path"],
                params=params,
                headers=headers,
                data=data,
                json_body=json_body,
                read=request.get("read"),
            )
            expect = substitute(step.get("expect", {}), variables)
            expected_view, actual_view = _expectation_views(expect, response)
            outcome = match(expected_view, actual_view, variables)
            where = f"{example.source}:{example.lines[0]} step {index}"
            if not outcome.ok:
                names = {"db": database, "uniq": variables["uniq"]}
                result.updates.append(
                    {
                        "kind": "http-step",
                        "index": index - 1,
                        "expect": unsubstitute(
                            _expect_from_view(step.get("expect", {}), outcome.update_view),
                            names,
                        ),
                    }
                )
                raise _StepFailure(
                    f"{where}: " + "; ".join(outcome.mismatches[:8]),
                    json_diff(outcome.expected_view, actual_view),
                    shown,
                )
            root = response.root()
            for name, path in step.get("capture", {}).items():
                try:
                    variables[name] = resolve_path(root, path)
                except KeyError:
                    raise _StepFailure(
                        f"{where}: capture {name!r}: nothing at {path} in the answer",
                        json_diff({"capture": path}, _for_display(root.get("json"))),
                        shown,
                    ) from None


# ---------------------------------------------------------------------------------------
# SQL record comparison
# ---------------------------------------------------------------------------------------


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


def _sorted_record(record: dict[str, Any]) -> dict[str, Any]:
    if record.get("type") == "query" and record.get("sort") == "rowsort":
        return {**record, "rows": sorted(record["rows"])}
    if record.get("type") == "statement" and record.get("expect") == "error":
        shown = dict(record)
        if "pattern" not in shown and "message" in shown:
            shown = {**shown, "pattern": None}
        return shown
    return record


def _updated_record(expected: dict[str, Any], actual: dict[str, Any]) -> dict[str, Any]:
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


# ---------------------------------------------------------------------------------------
# HTTP expectation views
# ---------------------------------------------------------------------------------------


def _query_params(query: dict[str, Any], database: str) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, list):
            params.extend((key, _as_text(v)) for v in value)
        else:
            params.append((key, _as_text(value)))
    if "db" not in query:
        params.append(("db", database))
    return params


def _expectation_views(expect: dict[str, Any], response: _Response) -> tuple[dict, dict]:
    """(expected, actual) objects for one `match` call covering every expected part."""
    expected: dict[str, Any] = {"status": expect.get("status", _SUCCESS_STATUS)}
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
    return expected, actual


def _expect_from_view(original: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in view.items():
        if key == "status" and "status" not in original and value == _SUCCESS_STATUS:
            continue
        if key == "absent_headers":
            out[key] = original.get(key, value)
            continue
        out[key] = value
    return out


def _describe_request(
    method: str, target: str, body: str = "", headers: dict[str, str] | None = None
) -> str:
    lines = [f"{method} {target}"]
    for name, value in (headers or {}).items():
        if name.lower() == "authorization":
            value = value.split(" ", 1)[0] + " ***"
        lines.append(f"{name}: {value}")
    if body:
        shown = body if len(body) <= 2000 else body[:2000] + "..."
        lines.extend(["", shown])
    return "\n".join(lines)


def _read_stream(response: requests.Response, read: dict[str, Any], default_timeout: float) -> str:
    """Read a streamed body until `events` events arrived, `timeout` passed, or it ended."""
    limit = read.get("events")
    deadline = time.monotonic() + float(read.get("timeout", default_timeout))
    raw = response.raw
    chunks: list[bytes] = []
    while time.monotonic() < deadline:
        try:
            reader = getattr(raw, "read1", None)
            chunk = reader(65536) if reader else raw.read(1)
        except Exception:  # a read timeout ends the reading, like a closed stream
            break
        if not chunk:
            break
        chunks.append(chunk)
        if limit is not None:
            text = b"".join(chunks).decode("utf-8", "replace")
            if len(parse_sse(text)) >= int(limit):
                break
    return b"".join(chunks).decode("utf-8", "replace")

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
import io
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

import requests

from conformance.cases import Example, render_sql_record
from conformance.expectations import Expectation, apply_expectation, find_expectation
from conformance.matchers import MatcherError, match
from conformance.payloads import (
    SubstitutionError,
    as_text,
    for_display,
    json_diff,
    parse_sse,
    resolve_path,
    substitute,
    text_diff,
    unsubstitute,
)
from conformance.results import FAILED, PASSED, SKIPPED, ExampleResult
from conformance.sql_records import actual_record, compare_records, sorted_record, updated_record

ADMIN_DATABASE = "demo"
DB_PREFIX = "conf_"
_SUCCESS_STATUS = {"$match": "int", "ge": 200, "lt": 300}

@dataclass(frozen=True)
class RunOptions:
    """How to reach the server. `token` is the admin token (None: send no credentials)."""

    base_url: str
    token: str | None = None
    timeout: float = 30.0
    admin_database: str = ADMIN_DATABASE


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
            token = as_text(variables[auth])
        else:
            token = as_text(substitute(auth, variables))
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
            shown_expected = sorted_record(expected)
            shown_actual = sorted_record(actual)
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
                    "record": unsubstitute(updated_record(record, actual), names),
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
            headers = {str(k): as_text(v) for k, v in request.get("headers", {}).items()}
            headers.update(self._auth_headers(step["request"].get("auth", "admin"), variables))
            data: Any = None
            json_body: Any = None
            shown_body = ""
            if "body" in request:
                data = as_text(request["body"]).encode("utf-8")
                shown_body = as_text(request["body"])
            elif "json" in request:
                json_body = request["json"]
                shown_body = json.dumps(json_body, ensure_ascii=False)
            elif "form" in request:
                data = {k: as_text(v) for k, v in request["form"].items()}
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
                        json_diff({"capture": path}, for_display(root.get("json"))),
                        shown,
                    ) from None


# ---------------------------------------------------------------------------------------
# HTTP expectation views
# ---------------------------------------------------------------------------------------


def _query_params(query: dict[str, Any], database: str) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, list):
            params.extend((key, as_text(v)) for v in value)
        else:
            params.append((key, as_text(value)))
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

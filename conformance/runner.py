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
4. drops the fresh database again and the users the example made (named `..._<uniq>`),
   also after a failure, and closes the background requests still open.

Steps are requests (sent in the foreground, or in the background with `background`),
`await` and `pending` of a background request, `restart`s through the commands of
`RunOptions.restarts`, and `operator` steps through `RunOptions.operator_cmd`; an example
with a restart or an operator step is skipped, with the reason, when a command it needs is
missing, and `run_all` runs such examples one at a time after the others. `run_all` also
keeps the server's wait places the examples running at once may hold within a budget
(`conformance.wait_places`).

`{{db}}` is the example's database, `{{uniq}}` its unique suffix (for user names),
`{{admin_token}}` the admin token, and `{{name}}` any value captured by an earlier step.

`Runner.run(example)` never raises for anything the server does; a broken case file raises
`CaseError` when loaded, not here.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import requests

from conformance.cases import Example, render_sql_record
from conformance.expectations import Expectation, apply_expectation, find_expectation
from conformance.http_checks import HttpRun, check_answer, check_pending
from conformance.matchers import MatcherError, match
from conformance.operators import NO_OPERATOR_CMD, Operator, operator_verbs
from conformance.payloads import (
    SubstitutionError,
    as_text,
    json_diff,
    substitute,
    text_diff,
    unsubstitute,
)
from conformance.pg_session import PgConnection, PgStepError, split_address
from conformance.restarts import RestartCommands, missing_commands, restart_server
from conformance.results import FAILED, PASSED, SKIPPED, XPASSED, ExampleResult
from conformance.sql_records import actual_record, compare_records, sorted_record, updated_record
from conformance.starts import NO_START_CMD, StartFailed, describe, settings_key, started
from conformance.transport import (
    Background,
    HttpRequest,
    Response,
    StepFailure,
    build_request,
    describe_request,
    send,
)
from conformance.wait_places import (
    DEFAULT_WAIT_PLACES,
    RAN_ALONE,
    places_needed,
    run_within_budget,
)

ADMIN_DATABASE = "demo"
DB_PREFIX = "conf_"
DEFAULT_AWAIT_S = 10.0
NO_PG = "the example speaks the PostgreSQL protocol: run the suite with --pg HOST:PORT"
FAIL_FAST_SKIP = "not run: an earlier example failed and --fail-fast stopped the run"


@dataclass(frozen=True)
class RunOptions:
    """How to reach the server. `token` is the admin token (None: send no credentials)."""

    base_url: str
    token: str | None = None
    timeout: float = 30.0
    admin_database: str = ADMIN_DATABASE
    restarts: RestartCommands = field(default_factory=RestartCommands)
    pg_address: str | None = None  # HOST:PORT of the PostgreSQL protocol, for `pg` steps
    start_cmd: str | None = None  # starts a server with an example's settings (`starts`)
    start_timeout: float = 120.0
    operator_cmd: str | None = None  # acts on the server as its operator (`operators`)


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
        cannot_restart = missing_commands(example.data.get("steps", []), self.options.restarts)
        if cannot_restart:
            return ExampleResult(example, SKIPPED, message=cannot_restart)
        verbs = operator_verbs(example.data.get("steps", []))
        if verbs and self.options.operator_cmd is None:
            return ExampleResult(example, SKIPPED, message=NO_OPERATOR_CMD.format(", ".join(verbs)))
        if self.options.pg_address is None and speaks_pg(example):
            return ExampleResult(example, SKIPPED, message=NO_PG)
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
                    raise StepFailure(
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
                self._drop_users(session, uniq)
        except StepFailure as failure:
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
        fail_fast: bool = False,
        wait_places: int = DEFAULT_WAIT_PLACES,
    ) -> list[ExampleResult]:
        """Run examples in parallel; results come back in the examples' order.

        An example whose expectation is SKIP is not run. Examples that restart the server
        run one at a time after all the others, so that no other example sees a restart.
        The examples running at once never need more than `wait_places` of the server's
        wait places (`conformance.wait_places`); one that needs more runs alone after the
        others, and its result's `note` says so.
        `on_result` is called (from one thread at a time) as each result is ready, for
        progress output. With `fail_fast`, the first failure (an unexpected pass included)
        stops the run: examples not yet started are skipped, with that reason. On Ctrl-C the
        examples not yet started are dropped and those running finish (and clean up) first.
        """
        rules = list(expectations)
        results: dict[int, ExampleResult] = {}
        pending: list[tuple[int, Example, Expectation | None]] = []
        alone: list[tuple[int, Example, Expectation | None]] = []
        report_lock = threading.Lock()
        stopped = threading.Event()

        def finish(index: int, result: ExampleResult) -> None:
            with report_lock:
                results[index] = result
                if on_result:
                    on_result(result)

        def attempt(
            example: Example, rule: Expectation | None, runner: Runner = self
        ) -> ExampleResult:
            if stopped.is_set():
                return ExampleResult(example, SKIPPED, message=FAIL_FAST_SKIP)
            result = apply_expectation(runner.run(example), rule)
            need = places_needed(example)
            if need > wait_places:
                result.note = RAN_ALONE.format(needed=need, budget=wait_places)
            if fail_fast and result.outcome in (FAILED, XPASSED):
                stopped.set()  # in the worker, before it can take the next example
            return result

        needed = [places_needed(example) for example in examples]
        with_settings: dict[tuple[tuple[str, str], ...], list[tuple[int, Example, Any]]] = {}
        for index, example in enumerate(examples):
            rule = find_expectation(example.id, rules)
            if rule is not None and rule.outcome == "SKIP":
                finish(index, ExampleResult(example, SKIPPED, message=rule.reason or "skipped"))
            elif example.data.get("settings"):
                key = settings_key(example.data["settings"])
                with_settings.setdefault(key, []).append((index, example, rule))
            elif restarts_server(example) or needed[index] > wait_places:
                alone.append((index, example, rule))
            else:
                pending.append((index, example, rule))
        run_within_budget(
            pending,
            jobs,
            wait_places,
            lambda item: needed[item[0]],
            lambda item: attempt(item[1], item[2]),
            lambda item, result: finish(item[0], result),
        )
        for index, example, rule in alone:
            finish(index, attempt(example, rule))
        for group in with_settings.values():
            if stopped.is_set():  # no server is started for examples that would not run
                for index, example, _ in group:
                    finish(index, ExampleResult(example, SKIPPED, message=FAIL_FAST_SKIP))
                continue
            for index, result in self._run_with_settings(group, attempt):
                finish(index, result)
        return [results[i] for i in sorted(results)]

    def _run_with_settings(
        self,
        group: list[tuple[int, Example, Expectation | None]],
        attempt: Callable[[Example, Expectation | None, Runner], ExampleResult],
    ) -> Iterator[tuple[int, ExampleResult]]:
        """The examples of one set of settings, on a server `--start-cmd` starts for them."""
        settings = group[0][1].data["settings"]
        if self.options.start_cmd is None:
            message = NO_START_CMD.format(describe(settings))
            for index, example, _ in group:
                yield index, ExampleResult(example, SKIPPED, message=message)
            return
        try:
            with started(self.options.start_cmd, settings, self.options.start_timeout) as server:
                options = replace(
                    self.options,
                    base_url=server.url,
                    pg_address=server.pg_address,
                    restarts=RestartCommands(),
                    start_cmd=None,
                    operator_cmd=None,
                )
                runner = Runner(options)
                for index, example, rule in group:
                    yield index, attempt(example, rule, runner)
        except StartFailed as failure:
            for index, example, _ in group:
                yield index, ExampleResult(example, FAILED, message=failure.message)

    # -- plumbing --------------------------------------------------------------------------

    def _has_database(self, name: str) -> bool:
        with self._lock:
            if name in self._databases:
                return self._databases[name]
        with requests.Session() as session:
            response = self._send(
                session,
                HttpRequest(
                    "GET",
                    "/exec",
                    [("db", name), ("query", "SHOW TABLES")],
                    self._auth_headers("admin", {}),
                ),
            )
        present = response.status == 200
        with self._lock:
            self._databases[name] = present
        return present

    def _drop_users(self, session: requests.Session, uniq: str) -> None:
        """Drop the users the example made (their names end in `_<uniq>`), with their
        tokens and grants, so that a run leaves the server's users as it found them."""
        try:
            listed = self._admin_exec(session, "SHOW USERS")
            body = listed.json() if listed.status == 200 else None
            rows = body.get("dataset") if isinstance(body, dict) else None
            for row in rows if isinstance(rows, list) else []:
                name = row[0] if isinstance(row, list) and row else None
                if isinstance(name, str) and name.endswith(f"_{uniq}"):
                    self._admin_exec(session, f"DROP USER IF EXISTS {name}")
        except requests.RequestException:
            pass  # the example's own verdict stands; a server gone away keeps its users

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

    def _admin_exec(self, session: requests.Session, sql: str) -> Response:
        return self._exec(session, self.options.admin_database, sql)

    def _exec(
        self, session: requests.Session, database: str, sql: str, auth: str = "admin"
    ) -> Response:
        headers = {"Content-Type": "text/plain; charset=utf-8", **self._auth_headers(auth, {})}
        request = HttpRequest("POST", "/exec", [("db", database)], headers, data=sql.encode())
        request.shown_body = sql
        return self._send(session, request)

    def _send(self, session: requests.Session, request: HttpRequest) -> Response:
        return send(session, self._base, request, self.options.timeout)

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
                raise StepFailure(
                    f"setup statement {n} failed: HTTP {response.status} {response.body[:300]}",
                    request=describe_request("POST", f"/exec?db={database}", sql),
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
                first_request = describe_request("POST", f"/exec?db={database}", expected["sql"])
            names = {"db": database, "uniq": variables["uniq"]}
            result.updates.append(
                {
                    "kind": "sql-record",
                    "index": index,
                    "record": unsubstitute(updated_record(record, actual), names),
                }
            )
        if failures:
            raise StepFailure("; ".join(failures), "\n".join(diffs), first_request)

    # -- HTTP examples ---------------------------------------------------------------------

    def _run_http(
        self,
        session: requests.Session,
        example: Example,
        database: str,
        variables: dict[str, Any],
        result: ExampleResult,
    ) -> None:
        run = HttpRun(session, database, variables, result)
        operator = Operator(self.options.operator_cmd or "", self._base, self.options.start_timeout)
        try:
            for index, step in enumerate(example.data["steps"], 1):
                where = f"{example.source}:{example.lines[0]} step {index}"
                if "restart" in step:
                    restart_server(step["restart"], self.options.restarts, self._base)
                    # The old server's connections are gone; the session opens new ones.
                    for adapter in session.adapters.values():
                        adapter.close()
                elif "await" in step:
                    self._await(run, step, where, index)
                elif "pending" in step:
                    check_pending(step, run.backgrounds[step["pending"]], where)
                elif "pg" in step:
                    self._pg_step(run, step, where)
                elif "operator" in step:
                    words = substitute(step, variables)
                    args = [as_text(a) for a in words["args"]]
                    operator.step(words["operator"], args, step["exit"], where)
                    for adapter in session.adapters.values():
                        adapter.close()
                else:
                    request = self._build(step, database, variables)
                    if "background" in step:
                        run.backgrounds[step["background"]] = Background(
                            session, self._base, request, self.options.timeout
                        )
                    else:
                        response = self._send(session, request)
                        check_answer(run, step, response, where, index, request.describe())
        finally:
            for background in run.backgrounds.values():
                background.close()
            for connection in run.pg_sessions.values():
                connection.close()
            operator.undo()

    def _pg_step(self, run: HttpRun, step: dict[str, Any], where: str) -> None:
        """Send a `pg` step's messages and match every backend message with `expect`."""
        exchange = substitute(step["pg"], run.variables)
        name = exchange.get("session")
        shown = f"PostgreSQL protocol at {self.options.pg_address}: {exchange['send']}"
        try:
            connection = run.pg_sessions.get(name) if name else None
            if connection is None:
                connection = self._pg_connect(exchange, run)
                if name and connection.refused is None:
                    run.pg_sessions[name] = connection
            if "plugin" in exchange:
                connection.plugin = exchange["plugin"]
            if connection.refused is not None:
                answer = connection.refused
                connection.close()
            else:
                answer = connection.exchange(exchange["send"], exchange.get("until"))
                if not name:
                    connection.close()
        except (OSError, PgStepError) as exc:
            raise StepFailure(f"{where}: {exc}", request=shown) from None
        expect = substitute(step["expect"], run.variables)
        outcome = match(expect, answer, run.variables)
        if not outcome.ok:
            raise StepFailure(
                f"{where}: " + "; ".join(outcome.mismatches[:8]),
                json_diff(outcome.expected_view, answer),
                shown,
            )

    def _pg_connect(self, exchange: dict[str, Any], run: HttpRun) -> PgConnection:
        assert self.options.pg_address is not None  # examples with pg steps need it
        host, port = split_address(self.options.pg_address)
        headers = self._auth_headers(exchange["auth"], run.variables)
        password = headers.get("Authorization", "").removeprefix("Bearer ")
        return PgConnection.open(
            host,
            port,
            exchange["user"],
            password,
            exchange.get("database", run.database),
            self.options.timeout,
            exchange.get("replication"),
        )

    def _build(self, step: dict[str, Any], database: str, variables: dict[str, Any]) -> HttpRequest:
        request = substitute(step["request"], variables)
        auth = self._auth_headers(step["request"].get("auth", "admin"), variables)
        return build_request(request, database, auth)

    def _await(self, run: HttpRun, step: dict[str, Any], where: str, index: int) -> None:
        background = run.backgrounds[step["await"]]
        within = float(step.get("within_s", DEFAULT_AWAIT_S))
        shown = background.request.describe()
        if not background.wait(within):
            raise StepFailure(
                f"{where}: the background request {step['await']!r} did not answer within"
                f" {within:g} s",
                request=shown,
            )
        if background.answer is None:
            raise StepFailure(
                f"{where}: the background request {step['await']!r} got no answer:"
                f" {background.error}",
                request=shown,
            )
        check_answer(run, step, background.answer, where, index, shown)


def speaks_pg(example: Example) -> bool:
    """Whether an example has a `pg` step (it needs the PostgreSQL protocol's address)."""
    return any("pg" in step for step in example.data.get("steps", []))


def restarts_server(example: Example) -> bool:
    """True when the example has a `restart` or an `operator` step (it then runs alone,
    after the others: no other example sees the server restarted or restored)."""
    steps = example.data.get("steps", [])
    return any("restart" in step or "operator" in step for step in steps)

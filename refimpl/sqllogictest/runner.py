"""Running a sqllogictest script against a server's `/exec`, in a fresh database per file.

Each record is sent alone as the body of `POST /exec?db=<database>`. `statement ok` passes on
a 2xx, `statement error` on a 4xx (a 5xx never passes: it is a server bug), a query when its
formatted values (`answers`) equal the expected ones or hash to the expected md5. A failure is
one of three kinds: the server refused what SQLite runs (`refused`), answered other values
(`wrong`), or failed with a 5xx or no answer at all (`broken`).

A query written with no result lines passes on a 4xx as well as on no rows: the corpus's
answers were written by running SQLite, which writes no values for a query it fails (as
`sum()` over integers past the 64-bit range, in `slt_lang_aggfunc.test`).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import requests

from refimpl.sqllogictest.answers import result_values, values_hash
from refimpl.sqllogictest.records import (
    Halt,
    HashThreshold,
    Query,
    Record,
    Statement,
    read_script,
)

#: The engine names this runner answers to in `skipif` / `onlyif`: the corpus's expected
#: answers are SQLite's, so the records written for SQLite are the ones to run.
DEFAULT_ENGINES = frozenset({"sqlite"})


@dataclass(frozen=True)
class Failure:
    """A record that did not pass: where, what was sent, what was expected and what came."""

    line: int
    sql: str
    kind: str  # "refused", "wrong" or "broken"
    expected: str
    got: str


@dataclass
class FileResult:
    path: Path
    passed: int = 0
    skipped: int = 0
    failures: list[Failure] = field(default_factory=list)
    halted_at: int | None = None

    @property
    def failed(self) -> int:
        return len(self.failures)

    @property
    def rate(self) -> float:
        """Passed records per record run (skipped ones do not count), 1.0 for none run."""
        ran = self.passed + self.failed
        return self.passed / ran if ran else 1.0

    def count(self, kind: str) -> int:
        return sum(1 for f in self.failures if f.kind == kind)


@dataclass(frozen=True)
class ExecAnswer:
    """What /exec answered: its status and JSON body (None when the body was not JSON)."""

    status: int
    body: dict | None
    text: str

    def error_text(self) -> str:
        if self.body is not None and "error" in self.body:
            return f"{self.status}: {self.body['error']}"
        return f"{self.status}: {self.text[:300]}"


class Server:
    """A server's /exec, spoken to over one kept-alive connection."""

    def __init__(self, url: str, token: str | None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.http = requests.Session()
        if token:
            self.http.headers["Authorization"] = f"Bearer {token}"

    def exec(self, sql: str, database: str) -> ExecAnswer:
        try:
            response = self.http.post(
                self.url + "/exec",
                params={"db": database},
                data=sql.encode("utf-8"),
                headers={"Content-Type": "text/plain; charset=utf-8"},
                timeout=self.timeout,
            )
        except requests.RequestException as error:
            return ExecAnswer(0, None, f"no answer: {error}")
        try:
            body = response.json()
        except ValueError:
            body = None
        return ExecAnswer(
            response.status_code, body if isinstance(body, dict) else None, response.text
        )

    def close(self) -> None:
        self.http.close()


class FileRun:
    """One script run in its own database, record by record."""

    def __init__(self, server: Server, database: str, engines: frozenset[str]) -> None:
        self.server = server
        self.database = database
        self.engines = engines
        self.hash_threshold = 0

    def run(self, path: Path, records: Iterable[Record]) -> FileResult:
        result = FileResult(path)
        for record in records:
            if not record.conditions.applies_to(self.engines):
                if isinstance(record, Statement | Query):
                    result.skipped += 1
                continue
            if isinstance(record, Halt):
                result.halted_at = record.line
                break
            if isinstance(record, HashThreshold):
                self.hash_threshold = record.value
                continue
            failure = (
                self._statement(record) if isinstance(record, Statement) else (self._query(record))
            )
            if failure is None:
                result.passed += 1
            else:
                result.failures.append(failure)
        return result

    def _statement(self, record: Statement) -> Failure | None:
        answer = self.server.exec(record.sql, self.database)
        if answer.status == 0 or answer.status >= 500:
            return Failure(record.line, record.sql, "broken", _wanted(record), answer.error_text())
        succeeded = 200 <= answer.status < 300
        if succeeded == record.ok:
            return None
        got = "ok" if succeeded else answer.error_text()
        return Failure(
            record.line, record.sql, "refused" if record.ok else "wrong", _wanted(record), got
        )

    def _query(self, record: Query) -> Failure | None:
        answer = self.server.exec(record.sql, self.database)
        expected = record.expected
        wanted = (
            f"{expected.count} values hashing to {expected.md5}"
            if expected.md5
            else "\n".join(expected.values or ())
        )
        if answer.status == 0 or answer.status >= 500:
            return Failure(record.line, record.sql, "broken", wanted, answer.error_text())
        if not 200 <= answer.status < 300 or answer.body is None:
            if expected.values == ():
                return None  # SQLite failed it too: the corpus wrote no values
            return Failure(record.line, record.sql, "refused", wanted, answer.error_text())
        columns = answer.body.get("columns")
        rows = answer.body.get("dataset")
        if not isinstance(columns, list) or not isinstance(rows, list):
            return Failure(record.line, record.sql, "wrong", wanted, "not a query's answer")
        if len(columns) != len(record.types):
            return Failure(
                record.line,
                record.sql,
                "wrong",
                wanted,
                f"{len(columns)} column(s) where the types say {len(record.types)}",
            )
        values = result_values(rows, record.types, record.sort)
        if expected.md5 is not None:
            digest = values_hash(values)
            if len(values) == expected.count and digest == expected.md5:
                return None
            return Failure(
                record.line,
                record.sql,
                "wrong",
                wanted,
                f"{len(values)} values hashing to {digest}",
            )
        if tuple(values) == expected.values:
            return None
        shown = _shown(values, self.hash_threshold)
        return Failure(record.line, record.sql, "wrong", wanted, shown)


def _wanted(record: Statement) -> str:
    return "ok" if record.ok else "an error"


def _shown(values: list[str], threshold: int) -> str:
    if threshold and len(values) > threshold:
        return f"{len(values)} values hashing to {values_hash(values)}"
    return "\n".join(values)


def run_file(server: Server, path: Path, engines: frozenset[str] = DEFAULT_ENGINES) -> FileResult:
    """Run one script in a database created for it (and dropped after)."""
    records = read_script(path.read_text(encoding="utf-8"))
    database = f"slt_{secrets.token_hex(4)}"
    created = server.exec(f"CREATE DATABASE {database}", "demo")
    if created.status != 200:
        raise RuntimeError(f"cannot create the database {database}: {created.error_text()}")
    try:
        return FileRun(server, database, engines).run(path, records)
    finally:
        server.exec(f"DROP DATABASE {database}", "demo")

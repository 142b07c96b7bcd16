"""What a fuzzed request must not do, judged against a real server: the fuzz's fixture
tables, the `Target` (a keep-alive client, the fuzzed database's state, the server's log)
and `judge`. Used by the SQL fuzz (tests/http/test_sql_fuzz.py), the hostile requests'
fuzz (tests/http/test_hostile_fuzz.py) and their long runs (tools/fuzz_sql.py)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

import requests

from tests.http.conftest import Server

# The fixture: one table of every type, one keyed and partitioned by day. Statements name
# these columns mostly (so they run), and a few names that do not exist.
TABLE_COLUMNS = {
    "id": "INT", "b": "BIGINT", "v": "DOUBLE", "s": "STRING", "sym": "SYMBOL", "ok": "BOOLEAN",
    "ts": "TIMESTAMP",
}  # fmt: skip
FIXTURE = (
    "CREATE TABLE t (id INT, b BIGINT, v DOUBLE, s STRING, sym SYMBOL, ok BOOLEAN, ts TIMESTAMP);"
    " CREATE TABLE k (id INT PRIMARY KEY, ts TIMESTAMP, v DOUBLE) TIMESERIES(ts) PARTITION BY DAY;"
    " INSERT INTO t VALUES (1, 10, 1.5, 'a', 'x', true, '2026-01-01T00:00:00Z'),"
    " (2, NULL, NULL, NULL, NULL, NULL, NULL),"
    " (3, -3, -2.0, '', 'y', false, '1970-01-01T00:00:00Z');"
    " INSERT INTO k VALUES (1, '2026-01-01T00:00:00Z', 1.0), (2, '2026-01-02T12:00:00Z', 2.0)"
)


@dataclass
class Target:
    """A server under fuzz: one keep-alive client, the state of the fuzzed database, and the
    server's log read on from where it was last read."""

    url: str
    token: str
    log: Path
    database: str
    http: requests.Session = field(default_factory=requests.Session)
    log_offset: int = 0
    state: tuple = ()

    @classmethod
    def on(cls, server: Server) -> Target:
        """A target on `server`, in a fresh database holding the fixture (`reset`)."""
        made = cls(server.url, server.token, server.log, "demo")
        made.reset()
        return made

    def __post_init__(self) -> None:
        self.http.headers["Authorization"] = f"Bearer {self.token}"
        self.log_offset = self.log.stat().st_size

    def exec(self, body: bytes, database: str | None = None) -> requests.Response:
        params = {"db": database or self.database}
        return self.http.post(self.url + "/exec", params=params, data=body, timeout=120)

    def rows(self, sql: str) -> list[list]:
        response = self.exec(sql.encode())
        assert response.status_code == 200, (sql, response.text)
        return response.json()["dataset"]

    def snapshot(self) -> tuple:
        """Every table's columns and rows, and the users: what a failure must leave alone."""
        tables = []
        for name, _kind in sorted(self.rows("SHOW TABLES")):
            quoted = '"' + name.replace('"', '""') + '"'
            columns = self.rows(f"SHOW COLUMNS FROM {quoted}")
            rows = sorted(map(repr, self.rows(f"SELECT * FROM {quoted}")))
            tables.append((name, repr(columns), tuple(rows)))
        return tuple(tables), repr(self.rows("SHOW USERS"))

    def reset(self) -> None:
        """A fresh database holding the fixture (the old one dropped): the fuzz's tables stay
        small however long it runs."""
        old, self.database = self.database, "fuzz_" + uuid.uuid4().hex[:10]
        steps = [(f"CREATE DATABASE {self.database}", "demo"), (FIXTURE, None)]
        if old != "demo":
            steps.append((f"DROP DATABASE {old}", "demo"))
        for sql, database in steps:
            response = self.exec(sql.encode(), database)
            assert response.status_code == 200, (sql, response.text)
        self.state = self.snapshot()

    def alive(self) -> bool:
        try:
            return requests.get(self.url + "/health", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def new_log_lines(self) -> list[str]:
        """Lines the server logged since the last call that show an unexpected failure."""
        with self.log.open("rb") as log:
            log.seek(self.log_offset)
            text = log.read()
        self.log_offset += len(text)
        return [
            line
            for line in text.decode("utf-8", "replace").splitlines()
            if "Traceback" in line or " ERROR " in line or "Error:" in line
        ]


def changes_nothing_when_failing(sql: str, body: dict) -> bool:
    """Whether a failure of `sql` must leave the database as it was: a failing first statement
    must, and so must any failure of the data-change scripts that open a transaction first
    (it rolls back). Statements of other scripts that ran before the failing one stay."""
    return body.get("statement", 1) == 1 or sql.startswith("BEGIN; INSERT INTO t (id) VALUES (99)")


def refused_unparsed(status: int, body: dict) -> bool:
    """Whether the answer refuses a script that did not parse, so that none of it ran."""
    return status == 400 and "position" in body and "statement" not in body


def judge(target: Target, sql: str, compare: bool = True) -> tuple[int, list[str]]:
    """Send `sql`; the status, and what went wrong (nothing, for a well-behaved server).
    With `compare` false, a script refused unparsed is not compared with the database's
    state (the long run samples those); every other answer always is."""
    problems: list[str] = []
    try:
        response = target.exec(sql.encode("utf-8", "surrogatepass"))
    except requests.RequestException as error:
        return 0, [f"no answer: {error}"]
    status = response.status_code
    body: dict = {}
    if status >= 500:
        problems.append(f"{status}: {response.text[:300]}")
    if response.headers.get("Content-Type") != "application/json":
        problems.append(f"content type {response.headers.get('Content-Type')!r}")
    else:
        body = response.json()
        if status >= 400 and not (isinstance(body.get("error"), str) and body["error"]):
            problems.append(f"{status} without an error sentence: {response.text[:300]}")
    if not target.alive():
        problems.append("/health did not answer within 2 s")
        return status, problems
    problems += [f"server log: {line}" for line in target.new_log_lines()]
    if sql.lstrip()[:6].upper() == "SELECT" and ";" not in sql:
        return status, problems  # one SELECT changes nothing: no need to look
    if not compare and refused_unparsed(status, body):
        return status, problems
    after = target.snapshot()
    if status >= 400 and changes_nothing_when_failing(sql, body) and after != target.state:
        problems.append(f"the failed request changed the database: {body.get('error')}")
    target.state = after
    return status, problems


def shorten(sql: str, limit: int = 300) -> str:
    """A statement as a report shows it: long ones by their head and size."""
    return sql if len(sql) <= limit else f"{sql[:limit]!r}... ({len(sql):,} characters)"

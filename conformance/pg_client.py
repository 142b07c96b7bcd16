"""The SQL examples over the PostgreSQL protocol (`refimpl conform --pg HOST:PORT`).

Each record of a SQL example is sent as one simple `Query` on a connection of its own (as
each record is one `POST /exec`), and its answer compared as over `/exec`: columns by name
and type (the PostgreSQL type standing for the column type; STRING and SYMBOL are both
`text`, so SYMBOL compares as STRING), rows as text, errors by the example's pattern.
Statement messages are not compared: the protocol's command tags replace them. The
example's database is made and dropped over HTTP, as for every example.

Needs psycopg 3 (the test extra installs it); imports nothing from `refimpl`.
"""

from __future__ import annotations

import dataclasses
import math
import re
from datetime import UTC, datetime
from typing import Any

import requests

from conformance.cases import Example, render_row, render_sql_record
from conformance.payloads import substitute, text_diff
from conformance.pg_session import split_address
from conformance.results import ExampleResult
from conformance.runner import Runner, RunOptions
from conformance.sql_records import compare_records, sorted_record
from conformance.transport import StepFailure

PG_SUFFIX = "@pg"
# PostgreSQL type OIDs -> the column type names of the examples.
_TYPE_NAMES = {
    16: "BOOLEAN",
    20: "BIGINT",
    21: "INT",
    23: "INT",
    26: "BIGINT",
    700: "DOUBLE",
    701: "DOUBLE",
    1700: "DOUBLE",
    25: "STRING",
    1043: "STRING",
    1042: "STRING",
    19: "STRING",
    1114: "TIMESTAMP",
    1184: "TIMESTAMP",
}
_SAME_OVER_PG = {"SYMBOL": "STRING"}
_STDIO_COPY = re.compile(r"\bCOPY\b.*\b(FROM\s+STDIN|TO\s+STDOUT)\b", re.IGNORECASE | re.DOTALL)


def pg_examples(examples: list[Example]) -> list[Example]:
    """The SQL examples, each under its id with `@pg` added; not those with a COPY FROM STDIN
    or TO STDOUT, whose rows travel in the protocol's copy messages, not in a Query's answer
    (the PostgreSQL protocol's own tests check those)."""
    return [
        dataclasses.replace(e, id=e.id + PG_SUFFIX)
        for e in examples
        if e.kind == "sql"
        and not any(_STDIO_COPY.search(record.get("sql", "")) for record in e.data["records"])
    ]


def _value(text: bytes | None, oid: int) -> Any:
    """A text-format value as the JSON value `/exec` would answer."""
    if text is None:
        return None
    value = text.decode("utf-8")
    kind = _TYPE_NAMES.get(oid)
    if kind == "BOOLEAN":
        return value == "t"
    if kind in ("INT", "BIGINT"):
        return int(value)
    if kind == "DOUBLE":
        return float(value)
    if kind == "TIMESTAMP":
        moment = datetime.fromisoformat(value)
        moment = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)
        head = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S")  # %Y writes 1 as 1
        micros = moment.microsecond
        return f"{head}.{micros:06d}Z" if micros % 1000 else f"{head}.{micros // 1000:03d}Z"
    return value


def _expected_over_pg(record: dict[str, Any]) -> dict[str, Any]:
    shown = dict(record)
    if record["type"] == "query":
        shown["columns"] = [
            {**c, "type": _SAME_OVER_PG.get(c["type"], c["type"])} for c in record["columns"]
        ]
    elif record.get("expect") == "ok":
        shown.pop("message", None)
    return shown


class PgRunner(Runner):
    """Runs SQL examples over the PostgreSQL protocol; databases are made over HTTP."""

    def __init__(self, options: RunOptions, pg_address: str, user: str = "admin") -> None:
        super().__init__(options)
        self.pg_host, self.pg_port = split_address(pg_address)
        self.pg_user = user

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
        for record in example.data["records"]:
            expected = _expected_over_pg(substitute(record, variables))
            actual = self._query(database, expected)
            problem = compare_records(expected, actual)
            if problem is None:
                continue
            where = f"{example.source}:{record.get('line', '?')}"
            failures.append(f"{where} (over the PostgreSQL protocol): {problem}")
            diffs.append(
                f"@ {where}\n"
                + text_diff(
                    render_sql_record(sorted_record(expected)),
                    render_sql_record(sorted_record(actual)),
                )
            )
        if failures:
            raise StepFailure(
                "; ".join(failures),
                "\n".join(diffs),
                f"Query on {self.pg_host}:{self.pg_port} db={database}",
            )

    def _query(self, database: str, expected: dict[str, Any]) -> dict[str, Any]:
        import psycopg
        from psycopg import pq

        sql = expected["sql"]
        try:
            conn = psycopg.connect(
                host=self.pg_host,
                port=self.pg_port,
                user=self.pg_user,
                password=self.options.token or "",
                dbname=database,
                autocommit=True,
                # libpq takes whole seconds; a fraction is rounded up, never to 0 (no limit).
                connect_timeout=max(1, math.ceil(self.options.timeout)),
            )
        except psycopg.Error as exc:
            return {
                "type": "statement",
                "expect": "error",
                "sql": sql,
                "status": 0,
                "message": f"could not connect: {exc}",
            }
        try:
            # PQexec: one simple Query, answered by its last statement, as /exec answers.
            answer = conn.pgconn.exec_(sql.encode("utf-8"))
        finally:
            conn.close()
        if answer.status == pq.ExecStatus.TUPLES_OK:
            oids = [answer.ftype(i) for i in range(answer.nfields)]
            rows = [
                [_value(answer.get_value(r, c), oids[c]) for c in range(answer.nfields)]
                for r in range(answer.ntuples)
            ]
            return {
                "type": "query",
                "columns": [
                    {
                        "name": (answer.fname(i) or b"").decode(),
                        "type": _TYPE_NAMES.get(oids[i], f"oid {oids[i]}"),
                    }
                    for i in range(answer.nfields)
                ],
                "sort": expected.get("sort", "nosort"),
                "sql": sql,
                "rows": [render_row(row) for row in rows],
            }
        if answer.status == pq.ExecStatus.COMMAND_OK:
            return {"type": "statement", "expect": "ok", "sql": sql}
        code = (answer.error_field(pq.DiagnosticField.SQLSTATE) or b"").decode()
        message = (answer.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode()
        # Failures of the server itself (internal, disk, unavailable) count as a 5xx would.
        status = 500 if code.startswith(("XX", "58", "57P")) else 400
        return {
            "type": "statement",
            "expect": "error",
            "sql": sql,
            "status": status,
            "message": message or answer.error_message.decode(),
        }

"""Where the shell's SQL runs: a data folder (embedded) or a server (HTTP), one answer shape.

Both give an `Answer` whose values are as JSON answers have them (timestamps as ISO-8601
text), and raise `ShellError` with the error's position when the text has one.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import requests

import refimpl
from refimpl.errors import KdbError

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
TIMEOUT_SECONDS = 300.0  # a statement may run long; a server that never answers may not


@dataclass(frozen=True, slots=True)
class Answer:
    """What one text answered: its last statement's columns and rows, or its message."""

    columns: tuple[tuple[str, str], ...] | None  # (name, type) of a query's columns
    rows: tuple[tuple[Any, ...], ...]
    message: str
    count: int


class ShellError(Exception):
    """A statement failed; `line` and `column` (1-based) point into the text when known."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


class Backend(Protocol):
    """Runs SQL texts on one database."""

    database: str
    where: str  # the data folder or the URL, for the greeting

    def run(self, text: str) -> Answer: ...

    def close(self) -> None: ...


def _json_value(value: Any, column_type: str) -> Any:
    if value is None:
        return None
    if column_type == "TIMESTAMP" and isinstance(value, int):
        moment = _EPOCH + datetime.timedelta(microseconds=value)
        digits = 3 if moment.microsecond % 1000 == 0 else 6
        return moment.isoformat(timespec="milliseconds" if digits == 3 else "microseconds").replace(
            "+00:00", "Z"
        )
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


class LocalBackend:
    """A data folder opened in this process, as the admin user (`refimpl.connect`)."""

    def __init__(self, data: Path, database: str) -> None:
        self.database = database
        self.where = str(data)
        self._connection = refimpl.connect(data, database)

    def run(self, text: str) -> Answer:
        try:
            result = self._connection.execute(text)
        except KdbError as exc:
            position = exc.details().get("position")
            if isinstance(position, dict):
                raise ShellError(
                    exc.message, position.get("line"), position.get("column")
                ) from None
            raise ShellError(exc.message) from None
        if result.columns is None:
            return Answer(None, (), result.message or "", result.count)
        types = [c.type for c in result.columns]
        rows = tuple(
            tuple(_json_value(v, t) for v, t in zip(row, types, strict=True)) for row in result.rows
        )
        columns = tuple((c.name, c.type) for c in result.columns)
        return Answer(columns, rows, result.message or "", len(rows))

    def close(self) -> None:
        self._connection.close()


class RemoteBackend:
    """A server's `POST /exec`, with a bearer token (none for a `--dev` server)."""

    def __init__(self, url: str, token: str | None, database: str) -> None:
        self.database = database
        self.where = url.rstrip("/")
        self._http = requests.Session()
        if token:
            self._http.headers["Authorization"] = f"Bearer {token}"
        self._http.headers["Content-Type"] = "text/plain; charset=utf-8"

    def run(self, text: str) -> Answer:
        try:
            response = self._http.post(
                f"{self.where}/exec",
                params={"db": self.database},
                data=text.encode("utf-8"),
                timeout=TIMEOUT_SECONDS,
            )
        except requests.RequestException as exc:
            raise ShellError(f"cannot reach {self.where}: {exc}") from None
        try:
            body = response.json()
        except ValueError:
            raise ShellError(
                f"{self.where} answered {response.status_code} without JSON; is it a refimpl"
                " server?"
            ) from None
        if response.status_code >= 400:
            position = body.get("position") or {}
            raise ShellError(
                str(body.get("error", response.reason)),
                position.get("line"),
                position.get("column"),
            )
        if "columns" in body:
            columns = tuple((c["name"], c["type"]) for c in body["columns"])
            rows = tuple(tuple(row) for row in body["dataset"])
            return Answer(columns, rows, "", body.get("count", len(rows)))
        return Answer(None, (), body.get("message", ""), body.get("count", 0))

    def close(self) -> None:
        self._http.close()


def table_names(backend: Backend) -> list[str]:
    """The database's tables (SHOW TABLES); empty when that fails."""
    try:
        return [str(row[0]) for row in backend.run("SHOW TABLES").rows]
    except ShellError:
        return []


def column_names(backend: Backend, table: str) -> Sequence[str]:
    """A table's columns (SHOW COLUMNS); empty when that fails."""
    try:
        return [str(row[0]) for row in backend.run(f"SHOW COLUMNS FROM {table}").rows]
    except ShellError:
        return []

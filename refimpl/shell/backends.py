"""Where the shell's SQL runs: a data folder (embedded) or a server (HTTP), one answer shape.

Both give a `StatementAnswer` whose values are as JSON answers have them (timestamps as ISO-8601
text), and raise `ShellError` with the error's position when the text has one.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import requests

import refimpl
from refimpl.errors import KdbError
from refimpl.shell.statements import OPEN_TRANSACTION, Kind, Piece, ShellError, StatementAnswer

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
TIMEOUT_SECONDS = 300.0  # a statement may run long; a server that never answers may not
# A held transaction's statement is tried by replaying the transaction so far: past this
# many statements the replays would cost more than they show, and the rest wait for COMMIT.
PREVIEW_LIMIT = 100


class Backend(Protocol):
    """Runs SQL on one database, in one session of the shell."""

    database: str
    where: str  # the data folder or the URL, for the greeting
    note: str  # what the greeting says of transactions; empty where they are the server's

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open (the prompt shows it as psql does: `db=*>`)."""
        ...

    def run(self, text: str) -> StatementAnswer:
        """Run `text` in one go, outside a held transaction (the catalog's lookups)."""
        ...

    def statement(self, piece: Piece) -> StatementAnswer:
        """Run one statement of the session; an error's position is in the whole text."""
        ...

    def use(self, database: str) -> None:
        """Go on in another database (`\\c`); ShellError, changing nothing, when it does not
        exist or a transaction is open."""
        ...

    def interrupted(self) -> str:
        """Ctrl-C stopped a statement on its way: put the session back in order (ShellError
        when that fails), and say in one line what became of the statement."""
        ...

    def close(self) -> None: ...


def _timestamp(value: Any) -> Any:
    if not isinstance(value, int):
        return value
    moment = _EPOCH + datetime.timedelta(microseconds=value)
    timespec = "milliseconds" if moment.microsecond % 1000 == 0 else "microseconds"
    return moment.isoformat(timespec=timespec).replace("+00:00", "Z")


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def json_rows(rows: Sequence[Sequence[Any]], types: Sequence[str]) -> tuple[tuple[Any, ...], ...]:
    """`rows` with their values as JSON answers have them: a TIMESTAMP (microseconds) as
    ISO-8601 text, a NaN or infinity as null. Column by column, so that a column that needs
    nothing costs nothing (60,000 rows convert in a fraction of a second)."""
    if not rows:
        return ()
    columns = []
    for values, column_type in zip(zip(*rows, strict=True), types, strict=True):
        if column_type == "TIMESTAMP":
            values = tuple(map(_timestamp, values))
        elif any(isinstance(v, float) and not math.isfinite(v) for v in values):
            values = tuple(map(_finite, values))
        columns.append(values)
    return tuple(zip(*columns, strict=True))


class LocalBackend:
    """A data folder opened in this process, as the admin user (`refimpl.connect`), in one
    session of the engine: a transaction stays open from its BEGIN to its COMMIT or
    ROLLBACK, whatever lines they are typed on."""

    note = ""

    def __init__(self, data: Path, database: str) -> None:
        self.database = database
        self.where = str(data)
        try:
            self._connection = refimpl.connect(data, database)
        except KdbError as exc:
            raise ShellError(exc.message) from None
        self._session = self._connection.session()

    @property
    def in_transaction(self) -> bool:
        return self._session.transaction is not None

    def run(self, text: str) -> StatementAnswer:
        try:
            result = self._session.execute(text)
        except KdbError as exc:
            position = exc.details().get("position")
            if isinstance(position, dict):
                raise ShellError(
                    exc.message, position.get("line"), position.get("column")
                ) from None
            raise ShellError(exc.message) from None
        if result.columns is None:
            return StatementAnswer(None, (), result.message or "", result.count)
        rows = json_rows(result.rows, [c.type for c in result.columns])
        columns = tuple((c.name, c.type) for c in result.columns)
        return StatementAnswer(columns, rows, result.message or "", len(rows))

    def statement(self, piece: Piece) -> StatementAnswer:
        return piece.run_on(self.run)

    def use(self, database: str) -> None:
        if self.in_transaction:
            raise ShellError(OPEN_TRANSACTION)
        try:
            session = self._connection.instance.session(database)
        except KdbError as exc:
            raise ShellError(exc.message) from None
        self._session.close()
        self._session, self.database = session, database

    def interrupted(self) -> str:
        # Stopped anywhere in the engine's work: the session is not trusted on; a new one
        # goes on, and closing the old one rolls back what it left open.
        rolled_back = self.in_transaction
        self._session.close()
        self._session = self._connection.instance.session(self.database)
        return "Interrupted: the statement was stopped" + (
            "; the open transaction is rolled back." if rolled_back else "."
        )

    def close(self) -> None:
        self._session.close()  # rolls back a transaction left open, as psql's quitting does
        self._connection.close()


class RemoteBackend:
    """A server's `POST /exec`, with a bearer token (none for a `--dev` server).

    Each request is a session of its own on the server, which rolls back what the request
    leaves open. So the shell holds a transaction itself: from BEGIN on, each statement is
    tried at once in a request that replays the transaction so far and is then rolled back
    (the answer shown is the one the statement gives inside the transaction; an error
    rolls the transaction back, as the server would); at COMMIT the whole transaction runs
    as one request, `BEGIN; ...; COMMIT`; at ROLLBACK it is forgotten, and nothing of it
    ever committed.
    """

    note = (
        "Over HTTP a transaction's statements run at its COMMIT; until then each is tried"
        " and undone to show its answer, and ROLLBACK discards them."
    )

    def __init__(self, url: str, token: str | None, database: str) -> None:
        self.database = database
        self.where = url.rstrip("/")
        self._token = token
        self._http = self._connections()
        self._held: list[Piece] | None = None  # the open transaction's statements
        self._sent: Piece | None = None  # the statement whose request is on its way

    def _connections(self) -> requests.Session:
        http = requests.Session()
        if self._token:
            http.headers["Authorization"] = f"Bearer {self._token}"
        http.headers["Content-Type"] = "text/plain; charset=utf-8"
        return http

    @property
    def in_transaction(self) -> bool:
        return self._held is not None

    def statement(self, piece: Piece) -> StatementAnswer:
        self._sent = piece
        held = self._held
        if held is None:
            if piece.kind is Kind.BEGIN:
                self._held = []
                return StatementAnswer(None, (), "transaction started", 0)
            return piece.run_on(self.run)
        if piece.kind is Kind.ROLLBACK:
            self._held = None
            return StatementAnswer(None, (), "transaction rolled back", 0)
        if piece.kind is Kind.COMMIT:
            self._held = None
            return self._in_transaction(held, piece)
        if len(held) >= PREVIEW_LIMIT:
            held.append(piece)
            return StatementAnswer(None, (), "held until COMMIT", 0)
        answer = self._in_transaction(held, piece)
        held.append(piece)
        return answer

    def use(self, database: str) -> None:
        if self._held is not None:
            raise ShellError(OPEN_TRANSACTION)
        before, self.database = self.database, database
        try:
            self.run("SELECT 1")  # a database that does not exist is a 404 naming it
        except ShellError:
            self.database = before
            raise

    def _in_transaction(self, held: list[Piece], last: Piece) -> StatementAnswer:
        """`BEGIN; held...; last` as one request (the server rolls back what it leaves
        open). An error forgets the transaction, as the server's session does."""
        parts = [Piece("BEGIN", 1, 1, Kind.BEGIN), *held, last]
        starts: list[int] = []  # each part's first line in the request
        lines: list[str] = []
        for part in parts:
            starts.append(len(lines) + 1)
            lines.extend(f"{part.text};".splitlines())
        try:
            return self.run("\n".join(lines))
        except ShellError as error:
            self._held = None
            index = (error.statement or len(parts)) - 1
            failed = parts[index]
            if failed is not last:  # an earlier statement fails now (another session's change)
                raise ShellError(
                    f"{error.message} (in the transaction's statement {index}: {failed.text})"
                ) from None
            line = None if error.line is None else error.line - starts[index] + 1
            raise last.place(ShellError(error.message, line, error.column)) from None

    def run(self, text: str) -> StatementAnswer:
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
                body.get("statement"),
            )
        if "columns" in body:
            columns = tuple((c["name"], c["type"]) for c in body["columns"])
            rows = tuple(tuple(row) for row in body["dataset"])
            return StatementAnswer(columns, rows, "", body.get("count", len(rows)))
        return StatementAnswer(None, (), body.get("message", ""), body.get("count", 0))

    def interrupted(self) -> str:
        """No cancel reaches a server over HTTP: the request is abandoned (its connection
        closed, the next request opens another) and the server may still finish it."""
        self._http.close()
        self._http = self._connections()
        sent, self._sent = self._sent, None
        if sent is not None and sent.kind is Kind.COMMIT:
            return (
                "Abandoned the COMMIT: the server may still commit the transaction; look at"
                " the data before you run it again."
            )
        if self._held is not None:
            return (
                "Abandoned the statement: it is not part of the open transaction (over HTTP"
                " it was only tried and undone)."
            )
        return (
            "Abandoned the request: over HTTP no cancel reaches the server, which may still"
            " finish the statement."
        )

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

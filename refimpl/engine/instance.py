"""A data folder: its databases, its users, and sessions on them.

Layout of a data folder: one sub-folder per database (`<name>/wal`, `<name>/checkpoints`),
`access.json` (users, hashed tokens, grants), and a `.lock` file that keeps a second process
from opening the same folder.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import shutil
import threading
from pathlib import Path
from typing import Any

from refimpl.engine.access import ADMIN, AccessControl, Principal
from refimpl.engine.features.change_stream import changes_function
from refimpl.engine.features.kdb_rev import kdb_rev_builder
from refimpl.engine.features.live_queries import SubscriptionManager
from refimpl.engine.options import EngineOptions
from refimpl.engine.session import Session
from refimpl.engine.statements.context import FunctionTables, ScalarFunction, StatementContext
from refimpl.engine.storage import checkpoint
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, WAL_FOLDER, Database
from refimpl.engine.storage.wal import inspect_log
from refimpl.engine.tracking.revisions import new_boot_id
from refimpl.errors import (
    DatabaseExists,
    InvalidValue,
    KdbError,
    NotAllowed,
    StorageError,
    UnknownDatabase,
)

DEFAULT_DATABASE = "demo"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_database_name(name: str) -> None:
    if not _NAME.match(name):
        raise InvalidValue(
            f"'{name}' is not a database name; use letters, digits and _ (at most 64),"
            " starting with a letter or _"
        )


def session_functions(context: StatementContext) -> dict[str, ScalarFunction]:
    """Scalar functions bound to a session (they need its database and rights)."""
    return {"kdb_rev": kdb_rev_builder(context)}


class Instance:
    """The databases of one data folder. Thread-safe."""

    def __init__(self, path: Path, options: EngineOptions) -> None:
        self.path = path
        self.options = options
        self.access = AccessControl(path)
        self.functions = FunctionTables(
            scalar=session_functions, tables={"changes": changes_function}
        )
        self._databases: dict[str, Database] = {}
        self._lock = threading.RLock()
        self._lock_file: Any = None
        self.recovery_messages: list[str] = []
        self.boot = new_boot_id()
        self.subscriptions = SubscriptionManager()

    @classmethod
    def open(cls, path: Path | str, options: EngineOptions | None = None) -> Instance:
        """Open a data folder (creating it and the `demo` database on the first start)."""
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        instance = cls(folder, options or EngineOptions())
        instance._take_folder_lock()
        try:
            for child in sorted(folder.iterdir()):
                if child.is_dir() and (child / WAL_FOLDER).is_dir():
                    instance._open_database(child.name)
            if DEFAULT_DATABASE.lower() not in instance._databases:
                instance.create_database(DEFAULT_DATABASE, if_not_exists=True)
        except BaseException:
            instance.close()
            raise
        return instance

    def _take_folder_lock(self) -> None:
        handle = open(self.path / ".lock", "a+")  # noqa: SIM115 - held for the instance's life
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise StorageError(
                f"the data folder {self.path} is in use by another refimpl process"
            ) from None
        self._lock_file = handle

    def _open_database(self, name: str) -> Database:
        database = Database.open(name, self.path / name, self.options, self.boot)
        self.recovery_messages += [f"database '{name}': {m}" for m in database.recovery_messages]
        self._databases[name.lower()] = database
        return database

    # -- databases -----------------------------------------------------------------------

    def database_names(self) -> list[str]:
        with self._lock:
            return sorted(d.name for d in self._databases.values())

    def has_database(self, name: str) -> bool:
        with self._lock:
            return name.lower() in self._databases

    def database(self, name: str) -> Database:
        with self._lock:
            database = self._databases.get(name.lower())
        if database is None:
            raise UnknownDatabase(name)
        return database

    def create_database(self, name: str, if_not_exists: bool = False) -> bool:
        """Create a database; False when it exists and `if_not_exists` is set."""
        check_database_name(name)
        with self._lock:
            if name.lower() in self._databases:
                if if_not_exists:
                    return False
                raise DatabaseExists(name)
            folder = self.path / name
            if folder.exists():
                shutil.rmtree(folder)
            (folder / WAL_FOLDER).mkdir(parents=True)
            checkpoint.sync_folder(folder)
            checkpoint.sync_folder(self.path)
            self._open_database(name)
            return True

    def drop_database(
        self, name: str, if_exists: bool = False, current: str | None = None
    ) -> bool:
        """Drop a database and its files; False when missing and `if_exists` is set.

        The instance lock is held only to take the database out of the list: waiting for its
        writer and closing it happen outside, so other requests never wait behind a drop.
        """
        with self._lock:
            database = self._databases.get(name.lower())
            if database is None:
                if if_exists:
                    return False
                raise UnknownDatabase(name)
            if current is not None and current.lower() == name.lower():
                raise NotAllowed(
                    f"database '{database.name}' is the one this session uses; drop it from"
                    " another database"
                )
            del self._databases[name.lower()]
        try:
            database.acquire_write()  # the transaction running in it, if any, ends first
        except KdbError:
            with self._lock:
                self._databases[name.lower()] = database
            raise
        database.release_write()
        database.close()
        doomed = self.path / f".dropped-{database.name}-{secrets.token_hex(4)}"
        os.replace(database.path, doomed)
        checkpoint.sync_folder(self.path)
        shutil.rmtree(doomed, ignore_errors=True)
        self.access.forget_database(database.name)
        return True

    # -- sessions ------------------------------------------------------------------------

    def session(
        self,
        database: str = DEFAULT_DATABASE,
        principal: Principal = ADMIN,
        *,
        acknowledge_later: bool = False,
    ) -> Session:
        """A session on `database` as `principal`.

        With `acknowledge_later`, its commits return before their flush: the caller then
        acknowledges nothing before `session.durable_needed` is durable (the protocol
        layers park the answer until then, see `refimpl.waiting.acknowledgements`).
        """
        return Session(
            self.database(database),
            principal,
            access=self.access,
            catalog=self,
            functions=self.functions,
            acknowledge_later=acknowledge_later,
        )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            databases = list(self._databases.values())
        return {
            "databases": {d.name: d.stats() for d in databases},
            "subscriptions": self.subscriptions.stats(),
        }

    def begin_shutdown(self) -> None:
        """Wake every waiting reader and subscriber: they answer with what they have."""
        self.subscriptions.close()
        with self._lock:
            databases = list(self._databases.values())
        for database in databases:
            database.commits.close()
            database.wake_board.close()

    def close(self) -> None:
        """Make everything durable and release the folder."""
        self.subscriptions.close()
        with self._lock:
            databases = list(self._databases.values())
            self._databases.clear()
        for database in databases:
            database.close()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None


def check_data(path: Path | str) -> tuple[str, bool]:
    """Report the state of every database's log and checkpoints, changing nothing.

    Returns the report text and whether everything is sound.
    """
    folder = Path(path)
    if not folder.is_dir():
        return f"{folder} is not a data folder", False
    lines: list[str] = []
    ok = True
    for child in sorted(folder.iterdir()):
        if not (child.is_dir() and (child / WAL_FOLDER).is_dir()):
            continue
        lines.append(f"database '{child.name}':")
        report = inspect_log(child / WAL_FOLDER)
        lines += [f"  log: {sentence}" for sentence in report.sentences()]
        ok = ok and report.ok
        checkpoints = checkpoint.list_checkpoints(child / CHECKPOINT_FOLDER)
        if not checkpoints:
            lines.append("  checkpoint: none (recovery replays the whole log)")
        for lsn, file in checkpoints:
            try:
                image = checkpoint.read(file)
                rows = sum(len(t.rows) for t in image.tables)
                lines.append(
                    f"  checkpoint: {file.name} at LSN {lsn}, {len(image.tables)} table(s),"
                    f" {rows} row(s)"
                )
            except KdbError as error:
                ok = False
                lines.append(f"  checkpoint: {error}")
        first = report.first_lsn
        if checkpoints and first is not None and first > checkpoints[-1][0] + 1:
            ok = False
            lines.append(
                f"  gap: the log starts at LSN {report.first_lsn} after checkpoint"
                f" {checkpoints[-1][0]}"
            )
        end = report.segments[-1].last_lsn if report.segments else 0
        if checkpoints and end < checkpoints[-1][0]:
            ok = False
            lines.append(
                f"  gap: the log ends at LSN {end} before checkpoint {checkpoints[-1][0]}"
            )
    if not lines:
        lines.append(f"{folder} holds no database")
    lines.append("state: sound" if ok else "state: DAMAGED")
    return "\n".join(lines), ok

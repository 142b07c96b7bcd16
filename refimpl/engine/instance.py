"""A data folder: its databases, its users, and sessions on them.

Layout of a data folder: one sub-folder per database (`<name>/wal`, `<name>/checkpoints`,
and `<name>/damaged` once `refimpl check --cut-damaged-log` moved a damaged log end aside),
`access.json` (users, hashed tokens, grants), `access.sessions` (the browser sessions'
journal), and a `.lock` file that keeps a second process from opening the same folder.
Every change to these files goes through the instance's `FileOps`.
"""

from __future__ import annotations

import fcntl
import re
import secrets
import shutil
import threading
from pathlib import Path
from typing import IO, Any

from refimpl.engine.access import ADMIN, AccessControl, Principal
from refimpl.engine.features.change_stream import changes_function
from refimpl.engine.features.kdb_rev import kdb_rev
from refimpl.engine.features.live_queries import SubscriptionManager
from refimpl.engine.files import REAL_FILES, FileOps
from refimpl.engine.measures import EngineMeasures
from refimpl.engine.options import EngineOptions
from refimpl.engine.progress import Progress, ProgressReport, no_report
from refimpl.engine.replication.functions import FUNCTIONS as replication_functions
from refimpl.engine.replication.sql_slots import TABLE_FUNCTIONS as replication_tables
from refimpl.engine.session import Session
from refimpl.engine.statements import pg_functions, queries
from refimpl.engine.statements.context import FunctionTables, ScalarFunction
from refimpl.engine.statements.prepared_runs import ParsedHandlers
from refimpl.engine.statements.publication_store import PublicationStore
from refimpl.engine.statements.replication_slots import SlotStore, check_replication_files
from refimpl.engine.storage import checkpoint
from refimpl.engine.storage.backup import check_backup, is_backup
from refimpl.engine.storage.database import CHECKPOINT_FOLDER, WAL_FOLDER, Database
from refimpl.engine.storage.memory_limit import MemoryBudget
from refimpl.engine.storage.wal_repair import cut_damaged_log, inspect_log
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
DAMAGED_FOLDER = "damaged"  # where `refimpl check --cut-damaged-log` keeps what it cut
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def check_database_name(name: str) -> None:
    if not _NAME.match(name):
        raise InvalidValue(
            f"'{name}' is not a database name; use letters, digits and _ (at most 64),"
            " starting with a letter or _"
        )


def session_functions() -> dict[str, ScalarFunction]:
    """The scalar functions of the session (they need its database and rights): one table
    for every session of an instance, each call finding its session when it runs."""
    return {
        "kdb_rev": kdb_rev,
        **pg_functions.functions(queries.view_columns),
        **replication_functions,
    }


class Instance:
    """The databases of one data folder. Thread-safe."""

    def __init__(self, path: Path, options: EngineOptions, files: FileOps = REAL_FILES) -> None:
        self.path = path
        self.options = options
        self.files = files
        self.access = AccessControl(path, files=files, sessions_per_user=options.sessions_per_user)
        self.functions = FunctionTables(
            scalar=session_functions(),
            tables={
                "changes": changes_function,
                **pg_functions.TABLE_FUNCTIONS,
                **replication_tables,
            },
        )
        self._handlers = ParsedHandlers()  # the handlers of parsed SELECTs, for sessions
        self._databases: dict[str, Database] = {}
        self._lock = threading.RLock()
        self._lock_file: IO[str] | None = None
        self.recovery_messages: list[str] = []
        self.boot = new_boot_id()
        self.subscriptions = SubscriptionManager(per_user=options.subscriptions_per_user)
        self.memory = MemoryBudget(options.memory_bytes)  # shared by every database
        # Logical replication's slots and publications: one store each for the data folder.
        self.slots = SlotStore(path, files)
        self.publications = PublicationStore(path, files)

    @classmethod
    def open(
        cls,
        path: Path | str,
        options: EngineOptions | None = None,
        files: FileOps = REAL_FILES,
        progress: ProgressReport = no_report,
    ) -> Instance:
        """Open a data folder (creating it and the `demo` database on the first start).

        Raises `StorageError` (`CorruptLog` naming the file, offset and LSNs) for damage.
        `progress` hears how each database's recovery goes (see `Database.open`).
        """
        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        instance = cls(folder, options or EngineOptions(), files)
        instance._take_folder_lock()
        try:
            for child in sorted(folder.iterdir()):
                if child.is_dir() and (child / WAL_FOLDER).is_dir():
                    instance._open_database(child.name, progress)
            if DEFAULT_DATABASE.lower() not in instance._databases:
                instance.create_database(DEFAULT_DATABASE, if_not_exists=True)
        except BaseException:
            instance.close()
            raise
        return instance

    def _take_folder_lock(self) -> None:
        self._lock_file = lock_folder(self.path)

    def _open_database(self, name: str, progress: ProgressReport = no_report) -> Database:
        database = Database.open(
            name, self.path / name, self.options, self.boot, self.files, progress, self.memory
        )
        self.recovery_messages += [f"database '{name}': {m}" for m in database.recovery_messages]
        self._databases[name.lower()] = database
        return database

    # -- databases -----------------------------------------------------------------------

    def database_names(self) -> list[str]:
        with self._lock:
            return sorted(d.name for d in self._databases.values())

    # Looked up without the lock: a dictionary's look-up is one step under the interpreter
    # lock, as is each change its holders make (a database is put in once open, taken out
    # before it closes), so a look-up sees the databases before or after each change, and
    # never waits for a CREATE DATABASE making its folder durable (every request looks up).

    def has_database(self, name: str) -> bool:
        return name.lower() in self._databases

    def database(self, name: str) -> Database:
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
            try:
                if folder.exists():
                    shutil.rmtree(folder)
                self.files.mkdir(folder / WAL_FOLDER)
                self.files.sync_directory(folder)
                self.files.sync_directory(self.path)
                self._open_database(name)
            except (OSError, KdbError) as exc:
                # All or nothing: a folder left behind would be opened as the database at
                # the next start.
                shutil.rmtree(folder, ignore_errors=True)
                if isinstance(exc, KdbError):
                    raise
                raise StorageError(
                    f"database '{name}' could not be created ({exc}); nothing was changed;"
                    " free disk space or check the disk, then try again"
                ) from exc
            return True

    def drop_database(self, name: str, if_exists: bool = False, current: str | None = None) -> bool:
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
        try:
            # Its replication slots and publications go with it (as PostgreSQL's DROP
            # DATABASE drops its slots); a slot a client streams from refuses the drop first.
            self.slots.forget_database(database.name)
            self.publications.forget_database(database.name)
            # Grants first: should the files stay, the database is there without its grants
            # (an administrator grants again); the other way round, a later database of the
            # same name would inherit them.
            self.access.forget_database(database.name)
            self.subscriptions.counts.forget_database(database.name)
        except KdbError:
            database.release_write()
            with self._lock:
                self._databases[name.lower()] = database
            raise
        database.release_write()
        try:
            database.close(write_checkpoint=False)  # its files go: no checkpoint for them
        except KdbError:
            pass  # its last flush failed: nothing of a database being dropped needs it
        doomed = self.path / f".dropped-{database.name}-{secrets.token_hex(4)}"
        try:
            self.files.replace(database.path, doomed)
        except OSError as exc:
            with self._lock:
                self._open_database(database.name)
            raise StorageError(
                f"database '{database.name}' could not be dropped ({exc}); it is still there;"
                " check the disk, then try again"
            ) from exc
        try:
            self.files.sync_directory(self.path)
        except OSError as exc:
            # The folder is renamed but maybe not durably: a restart may find the database
            # again, so say so rather than claim it is gone.
            raise StorageError(
                f"database '{database.name}' was dropped, but the disk failed to make that"
                f" durable ({exc}); after a restart it may be back: check the disk"
            ) from exc
        shutil.rmtree(doomed, ignore_errors=True)
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
            handlers=self._handlers,
            acknowledge_later=acknowledge_later,
        )

    def stats(self) -> dict[str, Any]:
        with self._lock:
            databases = list(self._databases.values())
        return {
            "databases": {d.name: d.stats() for d in databases},
            "subscriptions": self.subscriptions.stats(),
        }

    def measures(self) -> EngineMeasures:
        """Every open database's counters and the live queries, as of now (no table read)."""
        with self._lock:
            databases = list(self._databases.values())
        subscriptions = self.subscriptions.stats()
        return EngineMeasures(
            tuple(d.measures() for d in databases),
            subscriptions["subscriptions"],
            subscriptions["waiting"],
            self.subscriptions.measures(databases),
        )

    def begin_shutdown(self) -> None:
        """Wake every waiting reader and subscriber: they answer with what they have."""
        self.subscriptions.close()
        with self._lock:
            databases = list(self._databases.values())
        for database in databases:
            database.commits.close()
            database.wake_board.close()

    def close(self) -> None:
        """Make everything durable and release the folder.

        Every database is closed and the folder released even when one fails to close (its
        log's last flush, say); the first such error is raised afterwards.
        """
        self.subscriptions.close()
        with self._lock:
            databases = list(self._databases.values())
            self._databases.clear()
        error: KdbError | None = None
        for database in databases:
            try:
                database.close()
            except KdbError as exc:
                error = error or exc
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None
        if error is not None:
            raise error


def lock_folder(folder: Path) -> IO[str]:
    """The data folder's lock, held while the returned file is open; StorageError if taken."""
    handle = open(folder / ".lock", "a+")  # noqa: SIM115 - the caller holds it open
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise StorageError(
            f"the data folder {folder} is in use by another refimpl process"
        ) from None
    return handle


def check_data(path: Path | str, progress: ProgressReport = no_report) -> tuple[str, bool]:
    """Report the state of every database's log and checkpoints, changing nothing.

    Returns the report text and whether everything is sound (its last line says which:
    `state: sound` or `state: DAMAGED`). `progress` hears the bytes read so far of all
    the folder's log and checkpoint files, after each log segment and checkpoint file.
    """
    folder = Path(path)
    if not folder.is_dir():
        return f"{folder} is not a data folder", False
    lines: list[str] = []
    ok = True
    databases = _database_folders(folder)
    task = f"checking {folder}"
    total = sum(
        _bytes_in(child / WAL_FOLDER, "*.wal") + _bytes_in(child / CHECKPOINT_FOLDER)
        for child in databases
    )
    done = 0

    def read(count: int) -> None:
        nonlocal done
        done += count
        progress(Progress(task, done, total, "bytes"))

    held: dict[str, int] = {}  # the last LSN each database's checkpoint and log hold
    for child in databases:
        lines.append(f"database '{child.name}':")
        report = inspect_log(child / WAL_FOLDER, read)  # told after every segment read
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
            done += _size(file)
            progress(Progress(task, done, total, "bytes"))
        first = report.first_lsn
        if checkpoints and first is not None and first > checkpoints[-1][0] + 1:
            ok = False
            lines.append(
                f"  gap: the log starts at LSN {report.first_lsn} after checkpoint"
                f" {checkpoints[-1][0]}"
            )
        end = report.segments[-1].last_lsn if report.segments else 0
        held[child.name] = max(end, checkpoints[-1][0] if checkpoints else 0)
        if checkpoints and end < checkpoints[-1][0]:
            ok = False
            lines.append(f"  gap: the log ends at LSN {end} before checkpoint {checkpoints[-1][0]}")
    found, sound = check_replication_files(folder)
    lines += found
    ok = ok and sound
    if is_backup(folder):
        found, sound = check_backup(folder, held)
        lines += found
        ok = ok and sound
    if not lines:
        lines.append(f"{folder} holds no database")
    lines.append("state: sound" if ok else "state: DAMAGED")
    return "\n".join(lines), ok


def cut_damaged_logs(path: Path | str) -> tuple[str, bool]:
    """`refimpl check --cut-damaged-log`: move each damaged log end into `<db>/damaged/`.

    Run on a stopped server's data folder. A database whose latest checkpoint holds an LSN
    the cut would remove is left alone (its log would end before the checkpoint): it needs a
    backup. Returns the report and whether every database now opens.
    """
    folder = Path(path)
    if not folder.is_dir():
        return f"{folder} is not a data folder", False
    lines: list[str] = []
    ok = True
    with lock_folder(folder):  # never under a running server
        for child in _database_folders(folder):
            ok = _cut_one(child, lines) and ok
    if not lines:
        lines.append(f"{folder}: no damaged log, nothing was cut")
    return "\n".join(lines), ok


def _cut_one(child: Path, lines: list[str]) -> bool:
    """Cuts the damaged log end of the database in `child`, if any; False when it cannot."""
    wal = child / WAL_FOLDER
    damage = inspect_log(wal).damage
    if damage is None:
        return True
    checkpoints = checkpoint.list_checkpoints(child / CHECKPOINT_FOLDER)
    if checkpoints and checkpoints[-1][0] >= damage.first_lost_lsn:
        lines.append(
            f"database '{child.name}': the damage at LSN {damage.first_lost_lsn} is older"
            f" than checkpoint {checkpoints[-1][0]}; nothing was cut: restore a backup"
        )
        return False
    aside = child / DAMAGED_FOLDER / f"{damage.path.name}.{damage.offset}"
    try:
        cut_damaged_log(wal, aside)
    except OSError as exc:
        lines.append(f"database '{child.name}': the cut failed ({exc}); run it again")
        return False
    lines.append(
        f"database '{child.name}': cut {damage.path} at offset {damage.offset}"
        f" ({damage.reason}); {damage.lost()} lost; the damaged bytes are kept in {aside}"
    )
    return True


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:
        return 0


def _bytes_in(folder: Path, pattern: str = "*") -> int:
    """The bytes of the files directly in `folder` named like `pattern` (0 when it is
    missing)."""
    if not folder.is_dir():
        return 0
    return sum(_size(file) for file in folder.glob(pattern) if file.is_file())


def _database_folders(folder: Path) -> list[Path]:
    return [c for c in sorted(folder.iterdir()) if c.is_dir() and (c / WAL_FOLDER).is_dir()]

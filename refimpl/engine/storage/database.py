"""One database: its tables, its write-ahead log, its locks, checkpoints and recovery.

Locks:
- the write lock: one write transaction at a time (the "database lock");
- the state lock: held briefly to install a commit, and by readers while they read, so a
  reader never sees half a commit and is never blocked by an open transaction.

A commit appends its record to the log and installs its changes under the write lock, then
releases it and waits for the fsync outside it, so concurrent committers share one fsync
(group commit). A reader answers only after the commits it saw are durable.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from refimpl.engine.files import REAL_FILES, FileOps
from refimpl.engine.measures import DatabaseMeasures, LatencyHistogram
from refimpl.engine.options import EngineOptions
from refimpl.engine.progress import REPORT_EVERY, Progress, ProgressReport, no_report
from refimpl.engine.storage import bulk, bulk_merge, checkpoint, ddl, lock_waits, records, values
from refimpl.engine.storage.bulk import collector_paused as _collector_paused
from refimpl.engine.storage.locks import SharedLock
from refimpl.engine.storage.memory_limit import (
    MemoryBudget,
    row_bytes,
    rows_bytes,
    table_bytes,
    transaction_growth,
)
from refimpl.engine.storage.records import Entry
from refimpl.engine.storage.replay import ERRORS as REPLAY_ERRORS
from refimpl.engine.storage.replay import Replay, Unreplayable, apply_database_change, unreplayable
from refimpl.engine.storage.table import Ident, Row, Table
from refimpl.engine.storage.table_image import TakenTable
from refimpl.engine.storage.transaction import Transaction
from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_segments import HEADER_SIZE
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.engine.tracking.result_cache import ResultCache
from refimpl.engine.tracking.revisions import Changes, Revisions, Touched, new_boot_id
from refimpl.engine.tracking.signals import CommitSignal, WakeBoard
from refimpl.errors import (
    KdbError,
    SqlError,
    StorageError,
    UnknownTable,
)
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

log = logging.getLogger(__name__)

WAL_FOLDER, CHECKPOINT_FOLDER = "wal", "checkpoints"
# A recovery that loads at least this many rows freezes them (gc.freeze): below it, the
# collector's passes over them cost too little to matter.
_LONG_LIVED_ROWS = 100_000
# A clean close writes a checkpoint when the log holds this much since the latest one: the
# next open would otherwise replay it record by record (about 20,000 small commits a MB),
# where loading a checkpoint costs a bulk decode of the tables.
CLOSE_CHECKPOINT_BYTES = 1024 * 1024
# A commit of a table without rev column touches every value: one object (Touched's is a call)
_EVERYTHING = Touched(frozenset(), True)
# Whoever holds the write lock at a close (a transaction left open) makes the close's
# checkpoint wait at most this long before it is left out.
_CLOSE_CHECKPOINT_WAIT = 1.0


class Database:
    """A database in its own folder. Open with `Database.open`."""

    def __init__(
        self,
        name: str,
        path: Path,
        options: EngineOptions,
        boot: str | None = None,
        files: FileOps = REAL_FILES,
        memory: MemoryBudget | None = None,
    ) -> None:
        self.name = name
        self.path = path
        self.options = options
        self.files = files  # every change to a file of this database goes through it
        self.tables: dict[str, Table] = {}
        # The database's own state beyond its tables, logged as database changes and kept
        # by checkpoints: its settings, and its views (name -> canonical CREATE VIEW).
        self.settings: dict[str, Any] = {"wal_archive": options.wal_archive_bytes, "views": {}}
        self.write_lock = threading.Lock()
        self.state_lock = SharedLock()
        self.applied_lsn = 0
        self.checkpoint_lsn = 0
        self.recovery_messages: list[str] = []
        self.commits = CommitSignal()
        self.wake_board = WakeBoard()
        self.revisions = Revisions(boot or new_boot_id())
        self.result_cache = ResultCache(options.result_cache_bytes)
        self.plan_cache = PlanCache()  # compiled SELECTs, each for the schema it read
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_thread: threading.Thread | None = None
        self._bytes_at_checkpoint = 0
        self.log: WriteAheadLog
        self.commit_seconds = LatencyHistogram()  # each commit's append and install
        self.checkpoints_written = 0
        # The memory limit every database of the data folder shares, and what each table's
        # rows count towards it (memory_limit), kept current at each commit.
        self.memory = memory if memory is not None else MemoryBudget()
        self.table_bytes: dict[str, int] = {}

    @property
    def views(self) -> dict[str, str]:
        """The views: lower-case name -> canonical CREATE VIEW text. Never changed in place
        (a change replaces the dict), so a reader may keep it."""
        return self.settings["views"]

    def committed_table(self, name: str) -> Table:
        """The committed table called `name` (any case); UnknownTable if there is none.
        A caller that also reads `applied_lsn` or the table's rows holds `state_lock`, so
        that no commit is installed between the two."""
        table = self.tables.get(name.lower())
        if table is None:
            raise UnknownTable(name)
        return table

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        name: str,
        path: Path,
        options: EngineOptions,
        boot: str | None = None,
        files: FileOps = REAL_FILES,
        progress: ProgressReport = no_report,
        memory: MemoryBudget | None = None,
    ) -> Database:
        """Open (creating) and recover: the latest checkpoint, then the log after it.

        `progress` hears how many of the log's records after the checkpoint were replayed,
        every few thousand records and at the end.
        """
        database = cls(name, path, options, boot, files, memory)
        with _collector_paused():
            database._recover(progress)
            if sum(map(len, database.tables.values())) >= _LONG_LIVED_ROWS:
                # What recovery loaded lives as long as its tables, and tuples of values
                # hold no cycle: kept out of every later pass of the collector, which would
                # otherwise look at all of it once more right after the start.
                gc.freeze()
        return database

    def _recover(self, progress: ProgressReport = no_report) -> None:
        try:
            self.files.mkdir(self.path)
        except OSError as exc:
            raise StorageError(f"database folder {self.path} cannot be created ({exc})") from exc
        checkpoints = checkpoint.list_checkpoints(self.path / CHECKPOINT_FOLDER)
        loaded: dict[str, list[Any]] = {}  # each table's rows in the checkpoint
        if checkpoints:
            image = checkpoint.read(checkpoints[-1][1])
            loaded = self._load_image(image)
        archive = int(self.settings["wal_archive"])
        self.log = WriteAheadLog(
            self.path / WAL_FOLDER,
            segment_bytes=self.options.segment_size_for(archive),
            fsync_delay=self.options.fsync_delay,
            files=self.files,
        )
        self.recovery_messages += self.log.recovery_messages
        if self.log.last_lsn and self.log.oldest_lsn > self.checkpoint_lsn + 1:
            raise StorageError(
                f"database '{self.name}': the log starts at LSN {self.log.oldest_lsn} but the"
                f" latest checkpoint covers only up to {self.checkpoint_lsn}; restore a backup"
            )
        if self.log.last_lsn < self.checkpoint_lsn:
            # The log lost records the checkpoint holds (a checkpoint is written only after
            # they were durable): new commits would reuse their LSNs and the next recovery,
            # which replays only after the checkpoint, would skip them.
            raise StorageError(
                f"database '{self.name}': the log ends at LSN {self.log.last_lsn} but the latest"
                f" checkpoint holds LSN {self.checkpoint_lsn}, so the log lost its end;"
                " restore a backup"
            )
        self.applied_lsn = self.checkpoint_lsn
        task = f"recovering database '{self.name}'"
        to_replay = max(0, self.log.last_lsn - self.checkpoint_lsn)
        replayed_bytes = 0
        replay = Replay(self.tables, self.settings)
        for first, payloads in self.log.read_runs(self.checkpoint_lsn):
            replayed_bytes += HEADER_SIZE * len(payloads) + sum(map(len, payloads))
            # In pieces that end where a report is due, so that it tells exactly as many.
            start = 0
            while start < len(payloads):
                done = first + start - 1 - self.checkpoint_lsn  # records replayed so far
                end = start + REPORT_EVERY - done % REPORT_EVERY
                try:
                    replay.run(payloads[start:end])
                except Unreplayable as failed:
                    which = f"a record after LSN {self.checkpoint_lsn}"
                    if failed.index is not None:
                        which = f"the record at LSN {first + start + failed.index}"
                    raise unreplayable(self.log, which, failed.error) from failed.error
                start = min(end, len(payloads))
                self.applied_lsn = first + start - 1
                if (self.applied_lsn - self.checkpoint_lsn) % REPORT_EVERY == 0:
                    done = self.applied_lsn - self.checkpoint_lsn
                    progress(Progress(task, done, to_replay, "records"))
        try:
            replay.flush()
        except REPLAY_ERRORS as error:
            after = f"a record after LSN {self.checkpoint_lsn}"
            raise unreplayable(self.log, after, error) from error
        self.applied_lsn = max(self.applied_lsn, self.log.last_lsn)
        progress(Progress(task, to_replay, to_replay, "records"))
        self.commits.publish(self.log.durable_lsn)
        # What the log holds after the checkpoint counts as written since it, as before the
        # restart: else a database that replayed much would replay it again after its next
        # crash, its next checkpoint a whole `checkpoint_bytes` later.
        self._bytes_at_checkpoint = self.log.total_bytes - replayed_bytes
        # A table the replay left alone counts what its checkpoint's rows count, read from
        # their list faster than from the table.
        self.table_bytes = {
            key: table_bytes(table)
            if key not in loaded or replay.changed(key)
            else rows_bytes(loaded[key], table.schema, len(table.secondary))
            for key, table in self.tables.items()
        }
        self.memory.set(self.name, sum(self.table_bytes.values()))

    def _load_image(self, image: checkpoint.CheckpointImage) -> dict[str, list[Any]]:
        """Take a checkpoint's tables and settings; the rows of each table whose rows it
        decoded (a table may keep its chunks encoded, see `Table.load_image`), by its key."""
        self.settings.update(image.settings)
        loaded = {}
        for table_image in image.tables:
            statement = parse_cached(table_image.create).statements[0]
            assert isinstance(statement, ast.CreateTable)
            table = ddl.create_table(statement)
            table.next_rowid = table_image.next_rowid
            decoded = table.load_image(table_image)
            key = table.schema.name.lower()
            self.tables[key] = table
            if decoded:
                loaded[key] = table_image.rows
        self.checkpoint_lsn = image.lsn
        return loaded

    # -- writing -------------------------------------------------------------------------

    def acquire_write(
        self, timeout: float | None = None, lock_timeout: float | None = None
    ) -> None:
        """The write lock, within the statement timeout and the lock timeout (by default the
        server's; `lock_timeout` 0: none); a `timeout` of its own (a checkpoint's) alone."""
        if not self.write_lock.acquire(False):
            if timeout is None:
                timeout = self.options.statement_timeout
                lock_timeout = self.options.lock_timeout if lock_timeout is None else lock_timeout
            lock_waits.wait(self.write_lock, self.name, timeout, lock_timeout or 0.0)

    def release_write(self) -> None:
        self.write_lock.release()

    def commit_locked(self, txn: Transaction) -> int | None:
        """Log and install a transaction; the caller holds the write lock. Returns the
        commit's LSN (None when it changed nothing); the caller releases the write lock, then
        calls `wait_durable(lsn)` before acknowledging the commit."""
        one = txn.one_new_row()
        if one is not None:
            return self.commit_new_row(*one)
        started = time.perf_counter()
        entries = txn.seal_all()
        for text in txn.database_changes:
            entries.append(Entry.database(text))
        if not entries:
            return None
        growth = transaction_growth(txn, self.table_bytes)
        self.memory.reserve(self.name, growth.delta)  # MemoryFull: nothing is logged
        committed_at = time.time_ns() // 1000
        try:
            lsn = self.log.append(records.encode(committed_at, entries))
        except BaseException:
            self.memory.reserve(self.name, -growth.delta)
            raise
        for key, size in growth.tables.items():
            if size is None:
                self.table_bytes.pop(key, None)
            else:
                self.table_bytes[key] = size
        changes = txn.database_changes

        def install() -> None:
            txn.install(self.tables)
            for text in changes:
                apply_database_change(self.settings, text)

        self._make_visible(txn.touched(), lsn, install)
        self.commit_seconds.observe_alone(time.perf_counter() - started)
        return lsn

    def commit_new_row(self, key: str, name: str, table: Table, ident: Ident, row: Row) -> int:
        """`commit_locked` of a transaction whose one change is `row`, new to the committed
        `table` (key `key`, named `name`; `ident` not in it), without the general sealing,
        count and install: the same record, count, revisions and wake-ups. Returns the LSN."""
        started = time.perf_counter()
        schema = table.schema
        rowids = None if table.keyed else [ident[0]]
        old: list[Row | None] | None = [None] if schema.replica_identity_full else None
        record = records.encode_upsert(
            time.time_ns() // 1000, name, schema.column_names, [row], rowids, old
        )
        delta = row_bytes(row, schema, len(table.secondary))
        self.memory.reserve(self.name, delta)  # MemoryFull: nothing is logged
        try:
            lsn = self.log.append(record)
        except BaseException:
            self.memory.reserve(self.name, -delta)
            raise
        self.table_bytes[key] = self.table_bytes.get(key, 0) + delta
        rev = schema.rev_column
        touched = _EVERYTHING if rev is None else Touched(frozenset((row[schema.position(rev)],)))
        self._make_visible((key, touched), lsn, table.put_new, ident, row)
        self.commit_seconds.observe_alone(time.perf_counter() - started)
        return lsn

    def _make_visible(
        self, touched: Changes, lsn: int, install: Callable[..., object], *args: Any
    ) -> None:
        """Make a logged commit the committed state: the one way every commit path does it,
        in its exclusive hold of the state lock and in this order: `install(*args)` the rows,
        advance the revision counters of what it `touched`, wake the waiters of those
        values, and only then set `applied_lsn`.

        Readers rely on the order. The counters move after the install, never before: a
        reader that saw the old revision must not have read the new rows under it (the
        result cache). `applied_lsn` moves last: a reader that finds a counter moved and
        `applied_lsn` not is sure the commit's wake is coming or came (`live_answers.
        StateReads` takes a kept pair without the lock on that ground)."""
        with self.state_lock.exclusive():
            install(*args)
            if isinstance(touched, tuple):  # one table's: no dict made nor looped over
                self.revisions.advance_one(*touched)
                self.wake_board.notify(touched[0], *touched[1])  # (values, everything)
            else:
                self.revisions.advance(touched)
                for table, what in touched.items():
                    self.wake_board.notify(table, *what)
            self.applied_lsn = lsn

    def load_rows(self, name: str, rows: values.TypedRows) -> tuple[int, int] | None:
        """Insert new rows into table `name` as one transaction that other writers hardly
        wait for: (rows inserted, the commit's LSN), or None when these rows cannot load
        this way (see `bulk`): then nothing changed, and the caller inserts them the
        ordinary way. The caller has checked the right to write the table, and calls
        `wait_durable(lsn)` before acknowledging the load.

        The write lock is taken twice, briefly: to reserve the rows' ids, and to append the
        prepared log record and install the prepared rows. Everything else (placing,
        sorting, encoding) runs with no lock held. The collector is paused throughout: the
        load's objects (identities, places, partitions) are new and live as long as the
        table, and a pass over them would stop every thread.
        """
        with _collector_paused():
            return self._load_rows(name.lower(), rows)

    def _load_rows(self, key: str, rows: values.TypedRows) -> tuple[int, int] | None:
        self.acquire_write()
        try:
            table = self.tables.get(key)
            if table is None or not bulk.eligible(table, rows, self.settings):
                return None
            first = table.next_rowid
            if not table.keyed:
                # Ids of a load that does not commit are skipped, as a rollback's are.
                table.next_rowid += len(rows)
        finally:
            self.release_write()
        if not bulk.not_null_ok(table, rows):
            return None
        if table.keyed:
            idents = bulk.keys_of(table, rows)
        else:
            idents = bulk.rowid_idents(first, len(rows))
        load = bulk.prepare(key, table, rows, idents)
        try:
            if not load.distinct:  # a key twice: the ordinary insert says which
                return None
            # Merged into the table with no lock held, installed in a short step (`bulk_merge`).
            lsn = bulk_merge.merge_in(
                load, self.tables, self.acquire_write, self.release_write, self._commit_load
            )
        finally:
            load.let_go()  # a piece at a time, not in one step at this method's return
        if lsn is None:
            return None
        if len(load) >= _LONG_LIVED_ROWS:
            # The rows live as long as their table and hold no cycle: kept out of every
            # later pass of the collector, each of which would go over all of them again.
            gc.freeze()
        return len(load), lsn

    def _commit_load(self, merge: bulk_merge.Merge) -> int:
        """Log and install a merged load; the caller holds the write lock."""
        load = merge.load
        started = time.perf_counter()
        self.memory.reserve(self.name, load.growth)  # MemoryFull: nothing is logged
        try:
            stamped = records.stamp(load.record, time.time_ns() // 1000)
            lsn = self.log.append(stamped, load.checksum)
        except BaseException:
            self.memory.reserve(self.name, -load.growth)
            raise
        self.table_bytes[load.key] = self.table_bytes.get(load.key, 0) + load.growth
        self._make_visible((load.key, load.touched), lsn, merge.install)
        self.commit_seconds.observe_alone(time.perf_counter() - started)
        return lsn

    def wait_durable(self, lsn: int) -> None:
        """Block until `lsn` is on disk; then it may be acknowledged."""
        self.log.wait_durable(lsn)
        self.commits.publish(self.log.durable_lsn)
        self._maybe_checkpoint()

    def wait_visible(self) -> None:
        """Block until every commit a reader may have seen is durable."""
        applied = self.applied_lsn
        if self.log.durable_lsn < applied:
            self.log.wait_durable(applied)

    def set_setting(self, setting: str, value: str, text: str) -> None:
        """ALTER DATABASE ... SET: checked, logged and applied as its own transaction."""
        if setting != "wal_archive":
            raise SqlError(f"unknown database setting '{setting}'; the one setting is WAL_ARCHIVE")
        values.parse_size(value)
        self.acquire_write()
        try:
            txn = Transaction(self.tables)
            txn.database_changes.append(text)
            lsn = self.commit_locked(txn)
        finally:
            self.release_write()
        if lsn is not None:
            self.wait_durable(lsn)
        self.log.segment_bytes = self.options.segment_size_for(int(self.settings["wal_archive"]))

    # -- checkpoints and retention -------------------------------------------------------

    def image(self, timeout: float | None = None) -> checkpoint.CheckpointImage:
        """The committed state (tables and settings) as of the last commit, and its LSN;
        StatementTimeout when the write lock is not had within `timeout` (by default the
        statement timeout)."""
        # Only the tables' rows as of now are taken under the write lock, in a step per
        # block: the lists are made after it, so that writers do not wait for a copy of
        # every row (1.3 s of CPU for 1,000,000 rows).
        self.acquire_write(timeout)
        try:
            lsn, settings = self.applied_lsn, dict(self.settings)
            taken = [TakenTable.of(table) for table in self.tables.values()]
        finally:
            self.release_write()
        return checkpoint.CheckpointImage(lsn, settings, [table.image() for table in taken])

    def checkpoint(self, timeout: float | None = None) -> int:
        """Write the tables' state durably as of the last commit; returns its LSN. `timeout`
        bounds the wait for the write lock (as `image`)."""
        with self._checkpoint_lock:
            image = self.image(timeout)
            lsn = image.lsn
            if lsn:
                self.log.wait_durable(lsn)
            folder = self.path / CHECKPOINT_FOLDER
            checkpoint.write(folder, image, self.files)  # StorageError: nothing changed
            checkpoint.remove_older(folder, lsn, self.files)
            self.checkpoint_lsn = lsn
            self._bytes_at_checkpoint = self.log.total_bytes
            self.checkpoints_written += 1
            self.trim_log()
            return lsn

    def trim_log(self) -> None:
        """Remove the oldest segments a checkpoint covers while the log is over its archive."""
        archive = int(self.settings["wal_archive"])
        segments = self.log.segments()
        total = self.log.total_bytes
        through = 0
        for segment in segments[:-1]:
            if total <= archive or segment.last_lsn > self.checkpoint_lsn:
                break
            total -= segment.size
            through = segment.last_lsn
        if through:
            # The bytes removed were counted in `_bytes_at_checkpoint`: without taking them
            # off, "written since the checkpoint" falls short by every trim so far and each
            # checkpoint comes one segment later than the one before.
            self._bytes_at_checkpoint -= self.log.remove_through(through)

    def _maybe_checkpoint(self) -> None:
        archive = int(self.settings["wal_archive"])
        segment = self.options.segment_size_for(archive)
        # Recovery sizes segments by the latest checkpoint's setting; a WAL_ARCHIVE replayed
        # from the log after it takes effect here, with the first commit.
        if self.log.segment_bytes != segment:
            self.log.segment_bytes = segment
        written = self.log.total_bytes - self._bytes_at_checkpoint
        # Over the archive, a checkpoint lets the trim remove the segments it covers: not
        # before a segment's worth of log since the last, or each commit would start one.
        # `checkpoint_bytes` alone bounds what a crash replays, also below a segment.
        over_archive = self.log.total_bytes > archive and written >= segment
        if written < self.options.checkpoint_bytes and not over_archive:
            return
        thread = self._checkpoint_thread
        if thread is not None and thread.is_alive():
            return
        self._checkpoint_thread = threading.Thread(
            target=self._background_checkpoint, name=f"checkpoint-{self.name}", daemon=True
        )
        self._checkpoint_thread.start()

    def _background_checkpoint(self) -> None:
        try:
            self.checkpoint()
        except KdbError as error:  # a full disk, say: the log keeps every commit meanwhile
            log.error("background checkpoint of database '%s' failed: %s", self.name, error)
        except Exception:  # a bug; it must not kill the server either
            log.exception("background checkpoint of database '%s' failed", self.name)

    # -- closing -------------------------------------------------------------------------

    def close(self, write_checkpoint: bool = True) -> None:
        """Make everything appended durable and close the log.

        With `write_checkpoint` (the default; a database about to be dropped passes False), a
        database whose log holds `CLOSE_CHECKPOINT_BYTES` or more since its latest
        checkpoint writes one first, so that the next open loads it instead of replaying
        that log. A failure to write it (a full disk, a failed log, a transaction holding
        the write lock) is logged and changes nothing else: the log still holds every commit.
        """
        self.commits.close()
        self.wake_board.close()
        thread = self._checkpoint_thread
        if thread is not None:
            thread.join()
        if (
            write_checkpoint
            and self.log.total_bytes - self._bytes_at_checkpoint >= CLOSE_CHECKPOINT_BYTES
        ):
            try:
                self.checkpoint(_CLOSE_CHECKPOINT_WAIT)
            except KdbError as error:
                log.error(
                    "the checkpoint of database '%s' at its close failed: %s", self.name, error
                )
        self.memory.forget(self.name)
        self.log.close()

    def stats(self) -> dict[str, Any]:
        with self.state_lock:
            tables = len(self.tables)
            rows = sum(len(t) for t in self.tables.values())
        return {
            "tables": tables,
            "rows": rows,
            "log_bytes": self.log.total_bytes,
            "log_segments": len(self.log.segments()),
            "durable_lsn": self.log.durable_lsn,
            "oldest_lsn": self.log.oldest_lsn,
            "checkpoint_lsn": self.checkpoint_lsn,
            "wal_archive_bytes": int(self.settings["wal_archive"]),
            "rev_values": self.revisions.kept_values(),
            # Table data against the memory limit: this database's, all databases' (memory_limit).
            "memory": {"table_bytes": self.memory.used_by(self.name), **self.memory.stats()},
            # A restored database's timeline (storage.restore); None on its first one.
            "timeline": self.settings.get("timeline"),
            "result_cache": self.result_cache.stats(),
        }

    def measures(self) -> DatabaseMeasures:
        """Its counters as of now; reads no table and takes no database lock."""
        cache = self.result_cache.stats()
        return DatabaseMeasures(
            name=self.name,
            commits=self.commit_seconds.snapshot(),
            fsyncs=self.log.fsync_seconds.snapshot(),
            log_bytes=self.log.total_bytes,
            log_segments=len(self.log.segments()),
            durable_lsn=self.log.durable_lsn,
            checkpoints=self.checkpoints_written,
            cache_hits=cache["hits"],
            cache_misses=cache["misses"],
        )

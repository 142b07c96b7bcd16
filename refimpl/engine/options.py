"""What the engine is configured with: built by `refimpl.settings` or by a caller."""

from __future__ import annotations

from dataclasses import dataclass

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class EngineOptions:
    """Engine settings; the defaults are those of a fresh server.

    - `wal_archive_bytes`: log kept for change-stream readers (a database may set its own).
    - `segment_bytes`: largest log segment; never more than a quarter of the archive.
    - `checkpoint_bytes`: log written since the last checkpoint that triggers a new one.
    - `statement_timeout`: seconds a statement may run, or wait for the database lock.
    - `lock_timeout`: seconds a statement may wait for the database lock (0: as long as
      `statement_timeout`), PostgreSQL's lock_timeout: a writer fails sooner, saying so.
    - `fsync_delay`: seconds added to every fsync (benchmarks only: a slow disk's flush).
    - `result_cache_bytes`: memory for cached SELECT answers per database (0: no cache).
    - `max_sql_bytes`: longest SQL text one call may run (UTF-8 bytes).
    - `subscriptions_per_user`: live-query subscriptions one principal keeps at once.
    - `copy_page_rows`: most rows one page of an initial copy asked for by a caller holds.
    - `sessions_per_user`: browser sessions one user keeps open at once.
    - `import_folder`: the folder of the data folder that `COPY t FROM 'file'` reads from.
    - `backup_folder`: the folder of the data folder that `BACKUP DATABASE` writes into.
    - `memory_bytes`: the limit on table data of all databases together (0: none).
    """

    wal_archive_bytes: int = 1024 * MB
    segment_bytes: int = 64 * MB
    checkpoint_bytes: int = 8 * MB
    statement_timeout: float = 30.0
    lock_timeout: float = 0.0
    fsync_delay: float = 0.0
    result_cache_bytes: int = 64 * MB
    max_sql_bytes: int = 1 * MB
    subscriptions_per_user: int = 2000
    copy_page_rows: int = 10_000
    sessions_per_user: int = 100
    import_folder: str = "import"
    backup_folder: str = "backup"
    memory_bytes: int = 0

    def segment_size_for(self, archive_bytes: int) -> int:
        return max(4096, min(self.segment_bytes, archive_bytes // 4))

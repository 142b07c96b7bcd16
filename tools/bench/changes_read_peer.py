"""`changes_read.py`'s peer: PostgreSQL's logical decoding of the same rows (a test_decoding
slot), read whole in one peek, in pages, or fetched as tuples by psycopg."""

from __future__ import annotations

import time

import harness
from changes_read_ours import PAGE_SQL
from changes_reading import Reading
from raw_readers import RawPostgres

PG_INSERT = b"table public.t: INSERT"
PEEK = "SELECT lsn, xid, data FROM pg_logical_slot_peek_changes('bench', NULL, NULL)"
PEEK_PAGE = "SELECT lsn, xid, data FROM pg_logical_slot_peek_changes('bench', NULL, {page})"


class Peer:
    """The PostgreSQL side: N rows written once, then read again and again by its slot."""

    def __init__(self, pg: harness.Postgres, rows: int, txn_rows: int) -> None:
        self.pg, self.rows = pg, rows
        with pg.connect() as connection:
            connection.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE PRECISION, s TEXT)")
            connection.execute(
                "SELECT pg_create_logical_replication_slot('bench', 'test_decoding')"
            )
        began = time.perf_counter()
        with pg.connect(autocommit=False) as connection:
            for first in range(0, rows, txn_rows):
                with connection.cursor() as cursor:
                    with cursor.copy("COPY t (id, v, s) FROM STDIN") as copy:
                        for i in range(first, min(rows, first + txn_rows)):
                            copy.write_row((i, i * 0.5, f"row {i}"))
                connection.commit()
        self.written = time.perf_counter() - began

    def counted(self) -> Reading:
        """The rows counted in the bytes (`RawPostgres`)."""
        client = RawPostgres(self.pg.port)
        reading = Reading.start(client.pid)
        count = client.count(PEEK, PG_INSERT)
        reading = reading.end(count)
        client.close()
        self._check(count, "counted")
        return reading

    def paged(self, page: int) -> Reading:
        """As many rows counted in the bytes, read in pages of `page` changes: the slot's
        first page again and again (see the module's docstring), one query a page."""
        client = RawPostgres(self.pg.port)
        query = PEEK_PAGE.format(page=page)
        reading = Reading.start(client.pid)
        count = 0
        while count < self.rows:
            got = client.count(query, PG_INSERT)
            if not got:
                raise RuntimeError(f"a peek of {page} changes gave no row")
            count += got
        reading = reading.end(count)
        client.close()
        return reading

    def decoded(self) -> Reading:
        """The rows fetched as Python tuples by psycopg (a server-side cursor)."""
        with self.pg.connect(autocommit=False) as connection:
            reading = Reading.start(connection.info.backend_pid)
            count = 0
            with connection.cursor(name="peek") as cursor:
                cursor.itersize = PAGE_SQL
                cursor.execute(PEEK)
                for _lsn, _xid, data in cursor:
                    if data.startswith("table public.t: INSERT"):
                        count += 1
            reading = reading.end(count)
            connection.rollback()
        self._check(count, "decoded")
        return reading

    def _check(self, count: int, how: str) -> None:
        if count != self.rows:
            print(f"  warning: logical decoding ({how}) gave {count} rows, expected {self.rows}")

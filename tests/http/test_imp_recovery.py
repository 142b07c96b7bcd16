"""A bulk /imp and another writer into the same table both commit while the import runs, and
after a SIGKILL the recovered database holds exactly what the server answered before it."""

from __future__ import annotations

import signal
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from tests.http.conftest import start_server

# Past bulk.FREEZE_ROWS: the load is prepared outside the write lock and frozen after.
ROWS = 120_000
TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE, qty BIGINT)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(symbol)"
)
START = datetime(2026, 1, 5, tzinfo=UTC)
EVERYTHING = "SELECT * FROM trades ORDER BY time, symbol, qty"


def _csv(rows: int) -> bytes:
    lines = ["time,symbol,price,qty"]
    for n in range(rows):
        # 2026-01-05 on, 3 s apart: about four days, so the rows fill several partitions
        at = START + timedelta(seconds=3 * n)
        lines.append(f"{at:%Y-%m-%dT%H:%M:%S}Z,S{n % 7},{n * 0.25},{n}")
    return ("\n".join(lines) + "\n").encode()


def test_a_writer_commits_during_a_bulk_import_and_recovery_keeps_both(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    try:
        server.sql(TRADES)
        body = _csv(ROWS)
        import_span: list[float] = []

        def run_import() -> None:
            began = time.monotonic()
            response = server.post("/imp", params={"table": "trades"}, data=body, timeout=300)
            assert response.status_code == 200, response.text
            assert response.json()["count"] == ROWS
            import_span.extend((began, time.monotonic()))

        importer = threading.Thread(target=run_import)
        importer.start()
        # The writer's rows are on 2026-02-01, a day the import does not touch; each one
        # acknowledged is noted with when it was asked and answered.
        written: list[tuple[float, float, int]] = []
        n = 0
        while importer.is_alive() or n < 3:
            began = time.monotonic()
            at = datetime(2026, 2, 1, tzinfo=UTC) + timedelta(milliseconds=n)
            answer = server.exec(
                f"INSERT INTO trades VALUES ('{at.isoformat()}', 'W', 1.5, {-n - 1})"
            )
            assert answer.status_code == 200, answer.text
            written.append((began, time.monotonic(), n))
            n += 1
        importer.join(300)
        assert len(import_span) == 2, "the import failed; see the assertion in its thread"
        began, ended = import_span
        # Both committed, and the writer did not wait for the whole import: some of its
        # commits were asked and answered while the import was being read or loaded.
        assert any(began < asked and answered < ended for asked, answered, _ in written)
        expected = server.rows(EVERYTHING)
        assert len(expected) == ROWS + len(written)
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)  # no clean close: what the log holds is replayed
    again = start_server(data)
    again.token = server.token  # the admin token was made and printed at the first start
    try:
        assert again.rows(EVERYTHING) == expected
    finally:
        again.stop()

"""A start whose recovery runs longer than `progress_after_s` logs how far it has come."""

from __future__ import annotations

import json
import time
from pathlib import Path

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.progress import REPORT_EVERY
from tests.http.conftest import start_server

COMMITS = 3 * REPORT_EVERY  # reports at each REPORT_EVERY records, and one at the end


def test_a_long_recovery_logs_its_progress(tmp_path: Path) -> None:
    data = tmp_path / "data"
    instance = Instance.open(data)
    session = instance.session("demo", ADMIN, acknowledge_later=True)  # no fsync per commit
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    for n in range(COMMITS):
        session.insert_rows("t", ["id"], [(n,)])
    session.close()
    instance.close()  # everything durable: the next start replays every commit
    # Any recovery is "long" at 0 s, so the lines do not depend on this machine's speed.
    (data / "kdb.conf").write_text("progress_after_s = 0\n")

    started = time.monotonic()
    server = start_server(data, "--log-format", "json")
    took = time.monotonic() - started
    try:
        assert server.rows("SELECT count(*) FROM t") == [[COMMITS]]
    finally:
        assert server.stop() == 0
    lines = [json.loads(line) for line in server.log.read_text().splitlines()]
    progress = [line["message"] for line in lines if line["logger"] == "refimpl.recovery"]
    total = COMMITS + 1  # and the CREATE TABLE
    assert progress[0] == f"recovering database 'demo': {REPORT_EVERY} of {total} records (33%)"
    assert progress[-1] == f"recovering database 'demo': {total} of {total} records (100%)"
    assert len(progress) <= took + 2  # a line a second and the last, not one per report

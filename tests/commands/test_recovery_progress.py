"""A start whose recovery takes more than a second logs how far it has come."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from tests.http.conftest import start_server

COMMITS = 30_000  # a few seconds of replay on this project's machines


def test_a_long_recovery_logs_its_progress(tmp_path: Path) -> None:
    data = tmp_path / "data"
    instance = Instance.open(data)
    session = instance.session("demo", ADMIN, acknowledge_later=True)  # no fsync per commit
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    for n in range(COMMITS):
        session.insert_rows("t", ["id"], [(n,)])
    session.close()
    instance.close()  # everything durable: the next start replays every commit
    started = time.monotonic()
    Instance.open(data).close()
    replay = time.monotonic() - started
    if replay < 1.5:
        pytest.skip(f"recovery took {replay:.2f} s here: too quick to be sure it passes 1 s")

    server = start_server(data, "--log-format", "json")
    try:
        assert server.rows("SELECT count(*) FROM t") == [[COMMITS]]
    finally:
        assert server.stop() == 0
    lines = [json.loads(line) for line in server.log.read_text().splitlines()]
    progress = [line["message"] for line in lines if line["logger"] == "refimpl.recovery"]
    assert progress[-1] == (
        f"recovering database 'demo': {COMMITS + 1} of {COMMITS + 1} records (100%)"
    )
    assert len(progress) < 2 * replay + 3  # a line a second, not one per report

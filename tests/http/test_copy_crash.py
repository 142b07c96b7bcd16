"""SIGKILL during a long COPY: after recovery all of its rows are there or none, and the change
stream agrees (one transaction, one LSN)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from tests.http.conftest import start_server

ROWS = 100_000


@pytest.mark.parametrize("delay", [0.3, 1.5, 4.0])
def test_a_killed_copy_is_all_or_nothing(tmp_path: Path, delay: float) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    try:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, v DOUBLE)")
        body = "".join(f"{i},name {i},{i / 7}\n" for i in range(ROWS)).encode()
        acknowledged = server.kill_during(
            lambda: server.post(
                "/exec",
                params={"db": "demo", "query": "COPY t FROM STDIN (FORMAT csv)"},
                data=body,
                headers={"Content-Type": "text/csv"},
                timeout=120,
            ),
            delay,
        )
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)
    instance = Instance.open(data)
    try:
        session = instance.session()
        count = session.execute("SELECT count(*) FROM t").rows[0][0]
        assert count in (0, ROWS)
        if acknowledged:
            assert count == ROWS  # acknowledged means durable
        changes = session.execute(
            # max_rows: the whole COPY is more rows than changes() reads without it
            "SELECT count(*), count(DISTINCT lsn) FROM changes('t', 0, 1000000) WHERE op = 'upsert'"
        ).rows[0]
        assert changes == ((ROWS, 1) if count else (0, 0))
    finally:
        instance.close()

"""SIGKILL during a long COPY: after recovery all of its rows are there or none, and the change
stream agrees (one transaction, one LSN)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest
import requests

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
        answers: list[object] = []

        def send() -> None:
            try:
                answers.append(server.post(
                    "/exec", params={"db": "demo", "query": "COPY t FROM STDIN (FORMAT csv)"},
                    data=body, headers={"Content-Type": "text/csv"}, timeout=120))
            except requests.RequestException as error:
                answers.append(error)

        sender = threading.Thread(target=send)
        sender.start()
        threading.Event().wait(delay)
        server.stop(signal.SIGKILL)
        sender.join(130)
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)
    acknowledged = any(isinstance(a, requests.Response) and a.status_code == 200
                       for a in answers)  # fmt: skip
    instance = Instance.open(data)
    try:
        session = instance.session()
        count = session.execute("SELECT count(*) FROM t").rows[0][0]
        assert count in (0, ROWS)
        if acknowledged:
            assert count == ROWS  # acknowledged means durable
        changes = session.execute(
            # max_rows: the whole COPY is more rows than changes() reads without it
            "SELECT count(*), count(DISTINCT lsn) FROM changes('t', 0, 1000000)"
            " WHERE op = 'upsert'"
        ).rows[0]
        assert changes == ((ROWS, 1) if count else (0, 0))
    finally:
        instance.close()

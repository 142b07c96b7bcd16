"""SIGKILL during a long CALL: after recovery all of its rows (in both tables it writes) are
there or none, and the change stream agrees (one transaction, one LSN)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from tests.http.conftest import start_server

ROWS = 60_000


@pytest.mark.parametrize("delay", [0.5, 3.0])
def test_a_killed_call_is_all_or_nothing(tmp_path: Path, delay: float) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    try:
        server.sql(
            "CREATE TABLE src (id INT PRIMARY KEY, v DOUBLE);"
            " CREATE TABLE a (id INT PRIMARY KEY, v DOUBLE);"
            " CREATE TABLE b (id INT PRIMARY KEY, v DOUBLE)"
        )
        body = "".join(f"{i},{i / 7}\n" for i in range(ROWS)).encode()
        copied = server.post(
            "/exec",
            params={"query": "COPY src FROM STDIN (FORMAT csv)"},
            data=body,
            headers={"Content-Type": "text/csv"},
            timeout=120,
        )
        assert copied.status_code == 200, copied.text
        server.sql(
            "CREATE PROCEDURE fill() LANGUAGE SQL AS $$ INSERT INTO a SELECT * FROM src;"
            " INSERT INTO b SELECT id, v * 2 FROM src $$"
        )
        acknowledged = server.kill_during(lambda: server.exec("CALL fill()"), delay)
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)
    instance = Instance.open(data)
    try:
        session = instance.session()
        counts = session.execute("SELECT (SELECT count(*) FROM a), (SELECT count(*) FROM b)").rows[
            0
        ]
        assert counts in ((0, 0), (ROWS, ROWS))
        if acknowledged:
            assert counts == (ROWS, ROWS)  # acknowledged means durable
        streams = [
            session.execute(
                f"SELECT count(*), min(lsn), max(lsn) FROM changes('{t}', 0, 1000000)"
                " WHERE op = 'upsert'"
            ).rows[0]
            for t in ("a", "b")
        ]
        if counts[0]:
            (count_a, low_a, high_a), (count_b, low_b, high_b) = streams
            assert count_a == count_b == ROWS
            assert low_a == high_a == low_b == high_b  # one LSN for both tables
        else:
            assert [s[0] for s in streams] == [0, 0]
    finally:
        instance.close()

"""`refimpl supervise`: a real server restarted gracefully and by a crash, same port and data."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import requests

from refimpl.commands.supervise import restart, split_port
from tests.conformance.supervised import restart_commands, start_supervised


def test_the_port_flag_is_taken_out() -> None:
    flags = ["--data", "d", "--port", "9", "--sample"]
    assert split_port(flags) == (["--data", "d", "--sample"], 9)
    assert split_port(["--port=7"]) == ([], 7)
    assert split_port(["--data", "d"]) == (["--data", "d"], 0)


def test_restart_without_a_supervisor_fails(tmp_path: Path) -> None:
    assert restart(tmp_path, "graceful", 1.0) == 1


def _healthy(url: str, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if requests.get(url + "/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.1)
    raise AssertionError(f"{url} did not come back")


def test_graceful_and_crash_restarts_keep_port_and_data(tmp_path: Path) -> None:
    state = tmp_path / "state"
    server = start_supervised(tmp_path / "data", state)
    try:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY)")
        server.sql("INSERT INTO t VALUES (1)")
        boots = [server.get("/api/rev", params={"table": "t"}).json()["boot"]]
        commands = restart_commands(state)
        for command in (commands[1], commands[3]):  # graceful, then crash
            done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=90)
            assert done.returncode == 0, done.stderr
            _healthy(server.url)
            assert server.rows("SELECT id FROM t") == [[1]]
            boots.append(server.get("/api/rev", params={"table": "t"}).json()["boot"])
        assert len(set(boots)) == 3, boots
        assert (state / "generation").read_text().strip() == "3"
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]

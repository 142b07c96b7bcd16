"""The whole conformance suite against refimpl, started as users start it, auth on.

This is the CI run of the specification: every example of spec/*.md, each in a fresh
database of its own, through the runner that other implementations use, with the
PostgreSQL protocol's port given (so the `pg` steps run, and every SQL example runs over
the protocol as well). The server is kept
by `refimpl supervise` and the runner gets the commands that restart it and act on it as
its operator, so the examples with graceful and crash restarts, backups, restores and
changed settings run too (none may be skipped for want of them).
"""

from __future__ import annotations

import json

import requests

from conformance import cli
from tests.conformance.supervised import (
    operator_command,
    restart_commands,
    start_command,
    start_supervised,
)
from tests.http.conftest import free_port


def test_every_spec_example_passes_against_a_real_server(tmp_path, capsys):
    state = tmp_path / "supervisor"
    # The protocol's port is chosen here, so that it stays the same across the restarts.
    pg_port = free_port()
    # A default server (16 threads: 4 wait places), as users start it: the runner's default
    # --wait-places keeps the waiting examples of its six jobs within them.
    server = start_supervised(tmp_path / "data", state, "--sample", "--pg-port", str(pg_port))
    try:
        users_before = _users(server.url, server.token)
        report = tmp_path / "report.json"
        code = cli.main(
            [
                "--url",
                server.url,
                "--token",
                server.token,
                "--jobs",
                "6",
                "--json",
                str(report),
                "--junit",
                str(tmp_path / "junit.xml"),
                "--pg",
                f"127.0.0.1:{pg_port}",
                "--start-cmd",
                start_command(tmp_path / "data"),
                "--operator-cmd",
                operator_command(state),
                *restart_commands(state),
            ]
        )
        output = capsys.readouterr().out
        assert code == 0, output[-6000:]
        summary = json.loads(report.read_text())
        assert summary, "the runner wrote no report"
        unrun = [
            r for r in summary["results"] if r["outcome"] == "skipped" and "--" in r["message"]
        ]
        assert not unrun, unrun  # none skipped for want of a restart, --pg, --start-cmd
        # or --operator-cmd; and the backups the operator steps took are gone
        assert not list((state / "backups").iterdir())
        assert summary["runner_version"] and summary["started_at"].endswith("+00:00")
        assert summary["duration_s"] > 0
        # The runner leaves the server's users as it found them.
        assert _users(server.url, server.token) == users_before
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]


def _users(url: str, token: str) -> list[str]:
    answer = requests.post(
        f"{url}/exec",
        params={"db": "demo"},
        data=b"SHOW USERS",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return sorted(row[0] for row in answer.json()["dataset"])

"""The whole conformance suite against refimpl, started as users start it, auth on.

This is the CI run of the specification: every example of spec/*.md, each in a fresh
database of its own, through the runner that other implementations use. The server is kept
by tools/supervise.py and the runner gets the commands that restart it, so the examples
with graceful and crash restarts run too (none may be skipped for want of them).
"""

from __future__ import annotations

import json

from conformance import cli
from tests.conformance.supervised import restart_commands, start_supervised


def test_every_spec_example_passes_against_a_real_server(tmp_path, capsys):
    state = tmp_path / "supervisor"
    server = start_supervised(tmp_path / "data", state, "--sample")
    try:
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
                *restart_commands(state),
            ]
        )
        output = capsys.readouterr().out
        assert code == 0, output[-6000:]
        summary = json.loads(report.read_text())
        assert summary, "the runner wrote no report"
        restarts = [r for r in summary["results"] if "restarts the server" in r["message"]]
        assert not restarts, restarts
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]

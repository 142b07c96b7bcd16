"""The whole conformance suite against refimpl, started as users start it, auth on.

This is the CI run of the specification: every example of spec/*.md, each in a fresh
database of its own, through the runner that other implementations use.
"""

from __future__ import annotations

import json

from conformance import cli
from tests.http.conftest import start_server


def test_every_spec_example_passes_against_a_real_server(tmp_path, capsys):
    server = start_server(tmp_path / "data", "--sample")
    try:
        report = tmp_path / "report.json"
        code = cli.main(
            [
                "--url", server.url,
                "--token", server.token,
                "--jobs", "6",
                "--json", str(report),
                "--junit", str(tmp_path / "junit.xml"),
            ]
        )
        output = capsys.readouterr().out
        assert code == 0, output[-6000:]
        summary = json.loads(report.read_text())
        assert summary, "the runner wrote no report"
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]

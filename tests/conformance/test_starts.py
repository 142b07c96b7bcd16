"""`--start-cmd`: examples with settings run on a server started for them, with those
settings, against refimpl itself (`refimpl supervise start`); a start command that does not
give a server fails them with the reason, and without one they are skipped with it."""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance import cli
from tests.conformance.supervised import start_command
from tests.http.conftest import Server, running_server

SETTINGS_EXAMPLES = ["--only", "stream-heartbeats", "--only", "stream-ends-at-its-age"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("starts") / "data") as running:
        yield running


def _run(server: Server, tmp_path: Path, *extra: str) -> dict[str, str]:
    report = tmp_path / "report.json"
    argv = ["--url", server.url, "--token", server.token, "--json", str(report)]
    cli.main([*argv, *SETTINGS_EXAMPLES, *extra])
    results = json.loads(report.read_text())["results"]
    return {r["id"]: f"{r['outcome']}: {r['message']}" for r in results}


def test_examples_with_settings_run_on_a_server_started_with_them(
    server: Server, tmp_path: Path
) -> None:
    outcomes = _run(server, tmp_path, "--start-cmd", start_command(server.data))
    assert all(o.startswith("passed") for o in outcomes.values()), outcomes


def test_without_a_start_command_they_are_skipped_with_the_reason(
    server: Server, tmp_path: Path
) -> None:
    outcomes = _run(server, tmp_path)
    assert all(
        o.startswith("skipped") and "--start-cmd" in o and "stream_" in o for o in outcomes.values()
    ), outcomes


def test_a_start_command_that_gives_no_server_fails_them_with_what_it_said(
    server: Server, tmp_path: Path
) -> None:
    script = "import sys; print('ready!'); sys.stderr.write('boom')"
    lying = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
    outcomes = _run(server, tmp_path, "--start-cmd", lying, "--restart-timeout", "10")
    assert all(
        o.startswith("failed") and "'ready!'" in o and "boom" in o for o in outcomes.values()
    ), outcomes

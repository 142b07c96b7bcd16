"""SQLite's sqllogictest files of triggers pass through `refimpl sqllogictest` (spec/sources.md,
"Which of SQLite's trigger tests apply": all their records do)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from refimpl.sqllogictest.cli import script_files
from refimpl.sqllogictest.runner import Server as SltServer
from refimpl.sqllogictest.runner import run_file
from tests.http.conftest import start_server

TRIGGERS = Path(__file__).resolve().parents[2].parent / "shared" / "sqllogictest" / "triggers"


@pytest.mark.skipif(not TRIGGERS.is_dir(), reason=f"the trigger files are not at {TRIGGERS}")
def test_every_record_of_the_trigger_files_passes(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data")
    try:
        files = script_files([TRIGGERS], [])
        assert len(files) == 2
        results = [run_file(SltServer(server.url, server.token), path) for path in files]
    finally:
        assert server.stop(signal.SIGTERM) == 0
    failures = {r.path.name: [(f.line, f.kind) for f in r.failures] for r in results}
    assert not any(failures.values()), failures
    assert sum(r.passed for r in results) == 38

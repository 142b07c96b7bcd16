"""`refimpl conform --pg HOST:PORT`: the SQL examples run over the protocol too."""

from __future__ import annotations

import subprocess
import sys

from tests.http.conftest import ROOT


def test_sql_examples_pass_over_the_protocol(pg):
    done = subprocess.run(
        [sys.executable, "-m", "refimpl", "conform", "--url", pg.http.url, "--token", pg.token,
         "--pg", f"{pg.host}:{pg.port}", "--jobs", "2", "--only", "sql-*", "--only", "types-*"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "over the PostgreSQL protocol" in done.stdout
    assert " 0 failed" in done.stdout.splitlines()[-1]

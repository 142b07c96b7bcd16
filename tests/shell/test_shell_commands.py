"""`refimpl sql -c` and piped input: answers on stdout, errors with their caret on stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.http.conftest import ROOT


def refimpl_sql(
    tmp_path: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDB_")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path))
    return subprocess.run(
        [sys.executable, "-m", "refimpl", "sql", "--data", str(tmp_path / "data"), *args],
        input=stdin,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_commands_scripts_and_formats(tmp_path: Path) -> None:
    made = refimpl_sql(
        tmp_path,
        stdin="CREATE TABLE t (id INT PRIMARY KEY, name STRING);\n"
        "INSERT INTO t VALUES (1, 'a'), (2, NULL);\n",
    )
    # Each statement's answer in turn, as psql shows them.
    assert made.returncode == 0, made
    assert made.stdout.splitlines() == ["table 't' created", "2 row(s) inserted"]
    shown = refimpl_sql(tmp_path, "--format", "json", "-c", "SELECT id, name FROM t ORDER BY id")
    assert json.loads(shown.stdout) == [{"id": 1, "name": "a"}, {"id": 2, "name": None}]
    table = refimpl_sql(tmp_path, "-c", "SELECT id, name FROM t ORDER BY id")
    assert "NULL" in table.stdout and table.stdout.rstrip().endswith("(2 rows)")


def test_an_error_exits_1_with_its_position_on_stderr(tmp_path: Path) -> None:
    failed = refimpl_sql(tmp_path, "-c", "SELECT 1\nFROM WHERE")
    assert failed.returncode == 1 and failed.stdout == ""
    lines = failed.stderr.splitlines()
    assert lines[0].startswith("ERROR: ")
    assert lines[1] == "LINE 2: FROM WHERE"
    assert lines[2].index("^") == len("LINE 2: FROM ")

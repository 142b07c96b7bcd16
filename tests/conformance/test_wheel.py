"""The conformance runner as another project uses it: from a built wheel, no checkout.

The wheel is built from this checkout and installed into a fresh virtual environment (its
dependencies come from the package index, as they do for any user); the runner there runs
the whole suite against a real server, from a folder that holds no spec.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import venv
from pathlib import Path

from tests.http.conftest import spawn_server

REPO = Path(__file__).resolve().parents[2]


def _run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KDB_", "PYTHON"))}
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def test_the_runner_from_a_wheel_runs_the_whole_suite(tmp_path: Path) -> None:
    built = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(REPO),
            "--no-deps",
            "-q",
            "-w",
            str(tmp_path / "dist"),
        ],
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = next((tmp_path / "dist").glob("refimpl-*.whl"))
    venv.create(tmp_path / "venv", with_pip=True)
    python = tmp_path / "venv" / "bin" / "python"
    installed = _run([str(python), "-m", "pip", "install", "-q", str(wheel)], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    refimpl = str(tmp_path / "venv" / "bin" / "refimpl")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    version = _run([refimpl, "--version"], cwd=elsewhere)
    assert version.returncode == 0, version.stderr
    spec_version = (REPO / "spec" / "VERSION").read_text().strip()
    assert f"spec {spec_version}" in version.stdout
    conform_version = _run([refimpl, "conform", "--version"], cwd=elsewhere)
    assert f"spec {spec_version}" in conform_version.stdout

    # The wheel's own supervisor keeps the server, so the restart and operator examples run
    # too: the restart, crash and operator commands need no checkout.
    state = tmp_path / "supervisor"
    data = tmp_path / "data"
    server = spawn_server(
        [
            refimpl,
            "supervise",
            "serve",
            "--state",
            str(state),
            "--",
            "--data",
            str(data),
            "--sample",
        ],
        data,
    )
    restarts = [
        f"{refimpl} supervise restart --state {shlex.quote(str(state))} {kind}"
        for kind in ("graceful", "crash")
    ]
    try:
        junit = elsewhere / "junit.xml"
        run = _run(
            [
                refimpl,
                "conform",
                "--url",
                server.url,
                "--token",
                server.token,
                "--jobs",
                "6",
                "--junit",
                str(junit),
                "--restart-cmd",
                restarts[0],
                "--crash-cmd",
                restarts[1],
                "--operator-cmd",
                f"{refimpl} supervise operate --state {shlex.quote(str(state))}",
            ],
            cwd=elsewhere,
        )
        assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
        assert " 0 failed" in run.stdout and junit.is_file()
        skipped = junit.read_text()
        assert "restarts the server" not in skipped  # none skipped for want of the commands
        assert "as its operator" not in skipped
    finally:
        assert server.stop() == 0

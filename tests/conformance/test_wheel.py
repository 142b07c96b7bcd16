"""The conformance runner as another project uses it: from a built wheel, no checkout.

The wheel is built from this checkout and installed into a fresh virtual environment (its
dependencies come from the package index, as they do for any user); the runner there runs
the whole suite against a real server, from a folder that holds no spec.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.http.conftest import spawn_server

REPO = Path(__file__).resolve().parents[2]


def _run(command: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("KDB_", "PYTHON"))}
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout
    )


def _install_wheel(tmp_path: Path, extra: str = "") -> str:
    """The wheel of this checkout installed in a fresh virtual environment (with `extra`,
    such as `[pg]`); the path of its `refimpl` command."""
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
    installed = _run([str(python), "-m", "pip", "install", "-q", f"{wheel}{extra}"], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr[-3000:]
    return str(tmp_path / "venv" / "bin" / "refimpl")


def test_the_runner_from_a_wheel_runs_the_whole_suite(tmp_path: Path) -> None:
    refimpl = _install_wheel(tmp_path)
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
            "--threads",
            "32",  # 8 wait places, given to the runner below
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
                "--wait-places",
                "8",
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


@pytest.mark.long
def test_the_wheel_with_pg_runs_every_kind_of_step_and_sqllogictest_fails_in_one_line(
    tmp_path: Path,
) -> None:
    """The product as another implementer uses it, every command given: from the wheel with
    its `pg` extra, `refimpl conform --pg --start-cmd --operator-cmd` runs every example
    (protocol sessions, examples with settings, backups and restores: none skipped) against
    a server of the same wheel, and `refimpl sqllogictest` answers a missing path and a
    wrong token with one line each."""
    refimpl = _install_wheel(tmp_path, "[pg]")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    state, data = tmp_path / "supervisor", tmp_path / "data"
    with socket.socket() as probe:  # the protocol's port is kept across restarts
        probe.bind(("127.0.0.1", 0))
        pg_port = probe.getsockname()[1]
    server = spawn_server(
        [refimpl, "supervise", "serve", "--state", str(state), "--"]
        + ["--data", str(data), "--sample", "--pg-port", str(pg_port)],
        data,
    )
    try:
        report = elsewhere / "report.json"
        run = _run(
            [
                refimpl,
                "conform",
                "--url",
                server.url,
                "--token",
                server.token,
                "--pg",
                f"127.0.0.1:{pg_port}",
                "--jobs",
                "4",
                "--json",
                str(report),
                # A restart on a loaded 2-core machine can take more than the default minute.
                "--restart-timeout",
                "240",
                "--operator-cmd",
                f"{refimpl} supervise operate --state {shlex.quote(str(state))}",
                "--start-cmd",
                f"{refimpl} supervise start --access-of {shlex.quote(str(data))}",
            ],
            cwd=elsewhere,
            timeout=3600,
        )
        assert run.returncode == 0, (run.stdout + run.stderr)[-6000:]
        results = json.loads(report.read_text())["results"]
        assert [r["id"] for r in results if r["outcome"] != "passed"] == []
        assert any(r["id"].endswith("@pg") for r in results)  # the SQL examples, again

        missing = _run(
            [refimpl, "sqllogictest", "--url", server.url, "--token", server.token, "nope.test"],
            cwd=elsewhere,
        )
        assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
        assert "nope.test" in missing.stderr and "Traceback" not in missing.stderr
        script = elsewhere / "one.test"
        script.write_text("query I\nSELECT 1\n----\n1\n", encoding="utf-8")
        wrong = _run(
            [refimpl, "sqllogictest", "--url", server.url, "--token", "not-a-token", str(script)],
            cwd=elsewhere,
        )
        assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr
        assert "Traceback" not in wrong.stderr
        passed = _run(
            [refimpl, "sqllogictest", "--url", server.url, "--token", server.token, str(script)],
            cwd=elsewhere,
        )
        assert passed.returncode == 0, passed.stdout + passed.stderr
    finally:
        assert server.stop() == 0

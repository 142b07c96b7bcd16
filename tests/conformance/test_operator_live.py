"""The spec's operator examples against a real refimpl server kept by `refimpl supervise`,
with refimpl's operator command (`refimpl supervise operate`), and with one that lies.

The honest command passes them and leaves no backup behind; a command that answers `restore`
with a plain restart, and `set` without changing the setting, fails each of them.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from conformance import cli
from tests.conformance.supervised import SUPERVISE, operator_command, start_supervised

OPERATOR_EXAMPLES = ["sources-restore-new-timeline", "settings-changed-and-restarted"]


def _lying_operator(state: Path, tmp_path: Path) -> str:
    """Restores by restarting (the data stays as it is), sets by restarting unchanged."""
    script = tmp_path / "lying_operator.py"
    script.write_text(
        "import subprocess, sys\n"
        "words = sys.argv[1:]\n"
        "if words[0] in ('restore', 'set'):\n"
        "    words = ['restart']\n"
        f"base = {[*SUPERVISE, 'operate', '--state', str(state)]!r}\n"
        "sys.exit(subprocess.run(base + words).returncode)\n"
    )
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def test_operator_examples_pass_with_refimpls_command_and_fail_with_a_lying_one(
    tmp_path: Path, capsys
) -> None:
    state = tmp_path / "supervisor"
    server = start_supervised(tmp_path / "data", state)
    try:
        base = ["--url", server.url, "--token", server.token, "--jobs", "2"]
        base += [arg for name in OPERATOR_EXAMPLES for arg in ("--only", name)]
        honest = cli.main([*base, "--operator-cmd", operator_command(state)])
        output = capsys.readouterr().out
        assert honest == 0, output[-4000:]
        assert "2 passed, 0 failed, 0 skipped" in output
        assert not list((state / "backups").iterdir())  # each example discarded its backup
        lying = cli.main([*base, "--operator-cmd", _lying_operator(state, tmp_path)])
        output = capsys.readouterr().out
        assert lying == 1
        assert "0 passed, 2 failed, 0 skipped" in output, output[-4000:]
    finally:
        assert server.stop() == 0, server.log.read_text()[-3000:]

"""docs/refimpl.service and docs/kdb.conf: what `docs/service.md` has a person copy."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.settings import KEYS, load_settings, parse_config
from tests.http.conftest import ROOT, _clean_environment

UNIT = ROOT / "docs" / "refimpl.service"
SAMPLE = ROOT / "docs" / "kdb.conf"
INSTALLED = "/opt/refimpl/bin/refimpl"


def unit_values(key: str) -> list[str]:
    return re.findall(rf"(?m)^{key}=(.*)$", UNIT.read_text())


def test_the_sample_loads_as_serve_reads_it() -> None:
    values = parse_config(SAMPLE.read_text(), str(SAMPLE))
    assert values == {"data": "/var/lib/kdb", "host": "127.0.0.1", "port": "9000"}
    settings = load_settings(config=SAMPLE, environ={})
    assert (str(settings.data), settings.host, settings.port) == ("/var/lib/kdb", "127.0.0.1", 9000)


def test_the_samples_commented_lines_are_known_settings_that_load() -> None:
    # Uncommented, each line would work: a person may take any of them as it is.
    commented = re.findall(r"(?m)^# (\w+) = (\S.*)$", SAMPLE.read_text())
    assert len(commented) >= 20
    for key, text in commented:
        assert key in KEYS, key
        load_settings(
            config=None, flags={"data": Path("/nonexistent")}, environ={f"KDB_{key.upper()}": text}
        )


def test_the_units_command_takes_the_sample_and_the_data_folder_agrees() -> None:
    (command,) = unit_values("ExecStart")
    program, subcommand, *flags = command.split()
    assert program == INSTALLED and subcommand == "serve"
    assert flags == ["--config", "/etc/kdb/kdb.conf"]
    # The state directory systemd makes is the sample's data folder.
    assert unit_values("StateDirectory") == ["kdb"] and unit_values("ConfigurationDirectory") == [
        "kdb"
    ]
    assert unit_values("WorkingDirectory") == ["/var/lib/kdb"]
    # `refimpl settings` takes serve's flags: the same command line, with the sample.
    done = subprocess.run(
        [sys.executable, "-m", "refimpl", "settings", "--config", str(SAMPLE)],
        capture_output=True,
        text=True,
        env=_clean_environment(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(rf"(?m)^data +/var/lib/kdb +{re.escape(str(SAMPLE))}$", done.stdout)
    # Exit status 2 is a refused setting: not restarted; the graceful stop is SIGTERM's.
    assert unit_values("RestartPreventExitStatus") == ["2"]
    assert unit_values("KillSignal") == ["SIGTERM"]


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_systemd_analyze_verifies_the_unit(tmp_path: Path) -> None:
    # verify checks that the program exists: this interpreter's refimpl stands in for the
    # installed one.
    unit = tmp_path / "refimpl.service"
    unit.write_text(UNIT.read_text().replace(INSTALLED, f"{sys.executable} -m refimpl"))
    done = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=120
    )
    # An unknown key or a bad value is only a warning on stderr: none may be there.
    assert done.returncode == 0 and str(unit) not in done.stderr, done.stderr
    assert "refimpl.service" not in done.stderr, done.stderr

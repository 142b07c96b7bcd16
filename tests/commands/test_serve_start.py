"""`refimpl serve` on a port another process holds: refused before anything is created."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import _clean_environment, spawn_server


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port another process's socket listens on."""
    with socket.create_server(("127.0.0.1", 0)) as holder:
        yield holder.getsockname()[1]


def serve(data: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "refimpl", "serve", "--data", str(data), *flags],
        capture_output=True,
        text=True,
        env=_clean_environment(),
        timeout=120,
    )


def test_a_port_in_use_stops_the_start_before_the_data_folder_exists(
    tmp_path: Path, taken_port: int
) -> None:
    data = tmp_path / "data"
    done = serve(data, "--port", str(taken_port))
    assert done.returncode == 2, done
    assert f"127.0.0.1:{taken_port} (port)" in done.stderr
    assert "another process listens on it" in done.stderr and "choose another port" in done.stderr
    assert "Traceback" not in done.stderr
    assert not data.exists()  # no data folder, no admin token
    assert "admin token" not in done.stdout


def test_a_pg_port_in_use_stops_the_start_before_the_data_folder_exists(
    tmp_path: Path, taken_port: int
) -> None:
    data = tmp_path / "data"
    done = serve(data, "--port", "0", "--pg-port", str(taken_port))
    assert done.returncode == 2, done
    assert f"cannot serve the PostgreSQL protocol on 127.0.0.1:{taken_port} (pg_port)" in (
        done.stderr
    )
    assert "choose another pg_port" in done.stderr
    assert not data.exists()


def test_the_same_port_for_both_protocols_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = serve(data, "--port", "9437", "--pg-port", "9437")
    assert done.returncode == 2, done
    assert "port and pg_port are both 9437" in done.stderr
    assert not data.exists()


def test_an_existing_data_folder_is_left_as_it_was(tmp_path: Path, taken_port: int) -> None:
    data = tmp_path / "data"
    data.mkdir()
    done = serve(data, "--port", str(taken_port))
    assert done.returncode == 2, done
    assert list(data.iterdir()) == []


def test_a_free_port_given_by_number_still_starts(tmp_path: Path) -> None:
    # The check closes its socket again: the server itself then listens on the port.
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    data = tmp_path / "data"
    command = [sys.executable, "-m", "refimpl", "serve", "--port", str(port), "--data", str(data)]
    running = spawn_server(command, data)
    try:
        assert running.url.endswith(f":{port}")
        assert running.get("/health").status_code == 200
    finally:
        assert running.stop() == 0


def test_a_host_that_is_not_this_machines_stops_the_start_before_anything(tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = serve(data, "--host", "192.0.2.1", "--port", "0")  # TEST-NET-1: never ours
    assert done.returncode == 2, done
    assert "cannot listen on 192.0.2.1:0 (port)" in done.stderr
    assert "host must be an address of this machine" in done.stderr
    assert "while attempting" not in done.stderr
    assert not data.exists()


def test_a_certificate_that_does_not_load_stops_the_start_before_anything(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    missing = tmp_path / "no-such-cert.pem"
    done = serve(data, "--port", "0", "--pg-port", "0", "--pg-tls-cert", str(missing))
    assert done.returncode == 2, done
    assert f"the PostgreSQL TLS certificate {missing}" in done.stderr
    assert not data.exists()
    done = serve(data, "--port", "0", "--pg-port", "0", "--pg-tls-key", str(missing))
    assert done.returncode == 2, done
    assert "pg_tls_key is given without pg_tls_cert" in done.stderr
    assert not data.exists()

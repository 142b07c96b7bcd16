"""A throwaway PostgreSQL 15 server for the differential test: Debian's binaries, a cluster
in a temporary folder, a free port on the loopback, C collation (text compares by bytes, as
refimpl's does), no fsync. `start_postgres` says why it cannot (None and a reason) instead
of failing, so the test is skipped with that reason where there is no PostgreSQL."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import psycopg

from tests.http.conftest import free_port

BIN = Path("/usr/lib/postgresql/15/bin")


@dataclass
class Postgres:
    """A running server: its port, its folder, and the process to stop."""

    port: int
    folder: Path
    process: subprocess.Popen[bytes]

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(
            host="127.0.0.1", port=self.port, user="postgres", dbname="postgres", autocommit=True
        )

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        shutil.rmtree(self.folder, ignore_errors=True)


def _as_owner(command: list[str]) -> list[str]:
    """`command` run as the user `postgres` when this runs as root (PostgreSQL refuses
    root), as this user otherwise."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def start_postgres() -> tuple[Postgres | None, str]:
    """A started server, or None and why there is none."""
    if not (BIN / "postgres").exists() or not (BIN / "initdb").exists():
        return None, f"PostgreSQL 15 is not installed ({BIN}/postgres): apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            return None, "running as root and there is no user 'postgres' to run PostgreSQL as"
    folder = Path(tempfile.mkdtemp(prefix="pgdiff-"))
    if os.geteuid() == 0:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
    data = folder / "data"
    initdb = _as_owner(
        [
            str(BIN / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--locale=C",
            "-E",
            "UTF8",
            "--no-sync",
        ]
    )
    done = subprocess.run(initdb, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        return None, f"initdb failed: {done.stderr[-500:]}"
    port = free_port()
    command = _as_owner(
        [
            str(BIN / "postgres"),
            "-D",
            str(data),
            "-p",
            str(port),
            "-k",
            str(folder),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "full_page_writes=off",
            "-c",
            "synchronous_commit=off",
            "-c",
            "statement_timeout=10s",
        ]
    )
    log = (folder / "postgres.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=log)
    server = Postgres(port, folder, process)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = (folder / "postgres.log").read_text(errors="replace")[-500:]
            shutil.rmtree(folder, ignore_errors=True)
            return None, f"postgres exited: {text}"
        try:
            server.connect().close()
            return server, ""
        except psycopg.OperationalError:
            time.sleep(0.1)
    server.stop()
    return None, "postgres did not accept connections within 30 s"

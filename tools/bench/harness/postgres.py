"""`Postgres`: a throwaway PostgreSQL cluster on loopback, the peer the benches compare with,
and `notify_table`, its LISTEN/NOTIFY table."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.places import LOOPBACK, free_port
from harness.started import Started


def postgres_bin() -> Path:
    """The folder of initdb and pg_ctl; Debian's postgresql is installed when missing."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        print("installing PostgreSQL (Debian package postgresql) ...", flush=True)
        install = ["apt-get", "install", "-y", "-q", "postgresql"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(
                ["apt-get", "update", "-q"],
                env=env,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            subprocess.run(install, env=env, stdout=subprocess.DEVNULL, check=True)
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise RuntimeError("no initdb after installing postgresql")
    return Path(found[-1]).parent


class Postgres(Started):
    """A throwaway PostgreSQL cluster on loopback; a context manager.

    fsync and synchronous_commit are on (the defaults). `settings` adds `-c name=value`.
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = {
            "max_connections": "300",
            "shared_buffers": "256MB",
            **(settings or {}),
        }
        self.folder = Path(tempfile.mkdtemp(prefix="pg-bench-"))
        self.data = self.folder / "data"
        self.sockets = self.folder / "sockets"
        self.port = 0
        self.bin = Path()
        self._as_postgres = os.geteuid() == 0
        self._started = False

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        done = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:2])} failed:\n{done.stdout}{done.stderr}")

    def start(self) -> Postgres:
        self.bin = postgres_bin()
        self.sockets.mkdir()
        if self._as_postgres:
            shutil.chown(self.folder, "postgres", "postgres")
            shutil.chown(self.sockets, "postgres", "postgres")
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        )
        self.port = free_port()
        options = f"-p {self.port} -k {self.sockets} -c listen_addresses={LOOPBACK} -c fsync=on"
        options += " -c synchronous_commit=on"
        for name, value in self.settings.items():
            options += f" -c {name}={value}"
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-w",
            "-t",
            "120",
            "-l",
            str(self.folder / "log"),
            "start",
        )
        self._started = True
        return self

    @property
    def conninfo(self) -> str:
        return f"host={LOOPBACK} port={self.port} user=postgres dbname=postgres"

    def connect(self, autocommit: bool = True) -> Any:
        import psycopg

        return psycopg.connect(self.conninfo, autocommit=autocommit)

    def stop(self) -> None:
        if self._started:
            try:
                self._run(
                    str(self.bin / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                )
            except RuntimeError as exc:
                print(f"warning: {exc}", file=sys.stderr)
            self._started = False
        shutil.rmtree(self.folder, ignore_errors=True)


def notify_table(pg: Postgres) -> None:
    """Table `c (id, sent)` in `pg`, whose AFTER INSERT trigger notifies channel `c` with the
    row as `id,sent`: the LISTEN/NOTIFY peer of refimpl's change feeds."""
    with pg.connect() as connection:
        connection.execute("CREATE TABLE c (id BIGINT PRIMARY KEY, sent DOUBLE PRECISION)")
        connection.execute(
            "CREATE FUNCTION c_notify() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " PERFORM pg_notify('c', NEW.id || ',' || NEW.sent); RETURN NEW; END $$"
        )
        connection.execute(
            "CREATE TRIGGER c_after AFTER INSERT ON c FOR EACH ROW EXECUTE FUNCTION c_notify()"
        )

"""Shared pieces of the HTTP and PostgreSQL benchmarks in this folder, one import
(`import harness`, then `harness.RefimplServer`, `harness.summary`...), each part in a module
of its own:

- `server.py`: `RefimplServer`, `python -m refimpl serve` in its own process on a temporary
  data folder and a free loopback port; its admin token, URL and pid; `sql()` over /exec; a
  graceful stop (SIGINT) that waits, and deletes the folder; `code=` runs another checkout's
  refimpl (as `versions.py` does). With `profile=FILE` the server runs under a launcher that
  profiles every worker thread's requests (see `PROFILE_LAUNCHER`), or under a `launcher` of
  the caller's that writes its own figures there. `trades_csv`: the CSV of a bulk import's
  trades.
- `postgres.py`: `Postgres`, a throwaway PostgreSQL cluster (Debian's packages, installed when
  missing) in a temporary folder on a free loopback port, fsync on; stopped and deleted at
  the end; `notify_table`, the LISTEN/NOTIFY peer's table.
- `lean_http.py`: `LeanHTTP`, a keep-alive HTTP/1.1 client cheap enough for load generators.
- `figures.py`: `percentile`, `summary`, `print_table`, `Check` and `print_checks` (figures
  against their targets).
- `processes.py`: `rss_mb`, `cpu_seconds`, `pin_apart`; `run_client_phase`, a phase of
  forked clients; `alternate_children`: a script's `--child` runs under each checkout in turn,
  their JSON results.
- `places.py`: the bench folder, the repository, loopback and a free port on it.
- `started.py`: `Started`, what a bench starts and stops (a server, a cluster) as a context
  manager that stops it when its start fails too.

Importing this package first also keeps the standard library's `http` package from being
shadowed by `http.py` of this folder (a script's folder comes first on `sys.path`): its
parts import `requests` only after this module has loaded the real one.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.places import BENCH


def _load_stdlib_http() -> None:
    if "http.client" in sys.modules:
        return
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
    try:
        import http.client  # noqa: F401  - the standard library's, cached in sys.modules
        import http.cookiejar  # noqa: F401
    finally:
        sys.path[:] = saved


_load_stdlib_http()


def bench_http() -> ModuleType:
    """This folder's http.py, which a plain import cannot reach (the name `http` is the
    standard library's): loaded by its path once a process, as `bench_http`, the name in
    `sys.modules` the forked clients' functions are pickled by."""
    loaded = sys.modules.get("bench_http")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("bench_http", BENCH / "http.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_http"] = module
    spec.loader.exec_module(module)
    return module


_MAIN_PID = os.getpid()


def _terminated(signum: int, frame: Any) -> None:
    # SIGTERM (a `timeout`, a CI stop): unwind, so that the servers and clusters started in
    # `with` blocks are stopped and their folders deleted. Forked children just end.
    if os.getpid() != _MAIN_PID:
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, _terminated)


# The parts, after the standard library's http is in place (they import `requests`).
from harness.figures import (  # noqa: E402
    CHECKS_FILE_VARIABLE,
    Check,
    percentile,
    print_checks,
    print_table,
    summary,
)
from harness.lean_http import LeanHTTP  # noqa: E402
from harness.places import LOOPBACK, REPO, free_port  # noqa: E402
from harness.postgres import Postgres, notify_table, postgres_bin  # noqa: E402
from harness.processes import (  # noqa: E402
    CLIENT_GRACE,
    CLIENT_WARMUP,
    alternate_children,
    cpu_seconds,
    pin_apart,
    reset_peak_rss,
    rss_mb,
    run_client_phase,
    unpin,
)
from harness.server import PROFILE_LAUNCHER, RefimplServer, trades_csv  # noqa: E402

__all__ = [
    "CHECKS_FILE_VARIABLE",
    "CLIENT_GRACE",
    "CLIENT_WARMUP",
    "LOOPBACK",
    "PROFILE_LAUNCHER",
    "REPO",
    "Check",
    "LeanHTTP",
    "Postgres",
    "RefimplServer",
    "alternate_children",
    "bench_http",
    "cpu_seconds",
    "free_port",
    "notify_table",
    "percentile",
    "pin_apart",
    "postgres_bin",
    "print_checks",
    "print_table",
    "reset_peak_rss",
    "rss_mb",
    "run_client_phase",
    "summary",
    "trades_csv",
    "unpin",
]

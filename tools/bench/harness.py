"""Shared pieces of the HTTP and PostgreSQL benchmarks in this folder.

- `RefimplServer`: `python -m refimpl serve` in its own process on a temporary data folder and a
  free loopback port; its admin token, URL and pid; `sql()` over /exec; a graceful stop
  (SIGINT) that waits, and deletes the folder; `code=` runs another checkout's refimpl (as
  `versions.py` does). With `profile=FILE` the server runs under a
  launcher that profiles every worker thread's requests (see `PROFILE_LAUNCHER`), or under a
  `launcher` of the caller's that writes its own figures there.
- `Postgres`: a throwaway PostgreSQL cluster (Debian's packages, installed when missing) in a
  temporary folder on a free loopback port, fsync on; stopped and deleted at the end.
- `LeanHTTP`: a keep-alive HTTP/1.1 client cheap enough for load generators.
- `percentile`, `summary`, `print_table`, `Check` and `print_checks` (figures against their
  targets), `rss_mb`, `cpu_seconds`.
- `trades_csv`: the CSV of a bulk import's trades; `alternate_children`: a script's `--child`
  runs under each checkout in turn, their JSON results.

Importing this module first also keeps the standard library's `http` package from being
shadowed by `http.py` of this folder (a script's folder comes first on `sys.path`).
"""

from __future__ import annotations

import datetime
import glob
import importlib.util
import json
import multiprocessing
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

_HERE = Path(__file__).resolve().parent


def _load_stdlib_http() -> None:
    if "http.client" in sys.modules:
        return
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
    try:
        import http.client  # noqa: F401  - the standard library's, cached in sys.modules
        import http.cookiejar  # noqa: F401
    finally:
        sys.path[:] = saved


_load_stdlib_http()

import requests  # noqa: E402


def bench_http() -> ModuleType:
    """This folder's http.py, which a plain import cannot reach (the name `http` is the
    standard library's): loaded by its path once a process, as `bench_http`, the name in
    `sys.modules` the forked clients' functions are pickled by."""
    loaded = sys.modules.get("bench_http")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("bench_http", _HERE / "http.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_http"] = module
    spec.loader.exec_module(module)
    return module


REPO = _HERE.parent.parent
LOOPBACK = "127.0.0.1"
_MAIN_PID = os.getpid()


def _terminated(signum: int, frame: Any) -> None:
    # SIGTERM (a `timeout`, a CI stop): unwind, so that the servers and clusters started in
    # `with` blocks are stopped and their folders deleted. Forked children just end.
    if os.getpid() != _MAIN_PID:
        os._exit(128 + signum)
    raise SystemExit(128 + signum)


if threading.current_thread() is threading.main_thread():
    signal.signal(signal.SIGTERM, _terminated)


# --- figures --------------------------------------------------------------------------------


def percentile(samples: Sequence[float], fraction: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(samples: Sequence[float]) -> dict[str, float]:
    """count, p50, p99 and max of samples (in their own unit)."""
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {
        "n": len(ordered),
        "p50": percentile(ordered, 0.5),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1],
    }


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "") -> None:
    """A plain text table: the first column left-aligned, the others right-aligned."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            if value != value:
                return "-"
            if abs(value) >= 100:
                return f"{value:,.0f}"
            if abs(value) >= 10:
                return f"{value:.1f}"
            return f"{value:.2f}"
        if isinstance(value, int):
            return f"{value:,}"
        return str(value)

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    if title:
        print(title)
    print(
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(headers, widths, strict=True))
        )
    )
    print("  ".join("-" * w for w in widths))
    for row in cells:
        print(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    print()


class Check(NamedTuple):
    """A figure and, where an issue sets one, its target and whether the run met it.

    `ours` and `peer` are the two raw figures a ratio was taken of, where the figure is one
    (refimpl's and PostgreSQL's rows/s, say): `compare.py` shows them beside the ratio.
    """

    label: str
    value: float
    target: str = ""
    met: bool = False
    ours: float | None = None
    peer: float | None = None


CHECKS_FILE_VARIABLE = "REFIMPL_BENCH_CHECKS"
"""When set, `print_checks` also appends each figure as one JSON line to the file it names
(`compare.py` collects every script's figures this way; a `KDB_` name would be taken for a
server setting)."""


def print_checks(checks: Sequence[Check]) -> None:
    """One line a figure, in the same columns in every script, then a blank line."""
    for check in checks:
        line = f"{check.label:58} {check.value:10.2f}"
        if check.target:
            line += f"   target {check.target:14} {'MET' if check.met else 'MISSED'}"
        print(line)
    print()
    record = os.environ.get(CHECKS_FILE_VARIABLE)
    if record:
        script = Path(sys.argv[0]).stem
        with open(record, "a", encoding="utf-8") as out:
            for check in checks:
                out.write(json.dumps({"script": script, **check._asdict()}) + "\n")


def rss_mb() -> tuple[float, float]:
    """This process's RSS in MB: current (/proc/self/statm) and peak (resource.getrusage
    ru_maxrss; Linux starts it anew at `reset_peak_rss`)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        current = pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        current = float("nan")
    return current, peak


def reset_peak_rss() -> None:
    """Start the peak RSS (VmHWM, ru_maxrss) anew at the current RSS: 5 to clear_refs."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc/<pid>/stat."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is the state (field 3); utime and stime are fields 14 and 15.
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


CLIENT_WARMUP = 0.5  # seconds of a phase's start that its clients do not count
CLIENT_GRACE = 120.0  # a phase's clients must be done this long after its end


def pin_apart(server: RefimplServer) -> None:
    """Every thread of `server` onto the first CPU, this process (and so every process it
    forks from now on) onto the others: a client's wait is then the server's delay, not the
    time the server kept the client off its core. Threads the server starts later inherit
    their creator's CPU. `unpin()` gives this process every CPU again."""
    assert server.process is not None
    pid = server.process.pid
    for thread in os.listdir(f"/proc/{pid}/task"):
        os.sched_setaffinity(int(thread), {0})
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 2)))


def unpin() -> None:
    """This process on every CPU again (after `pin_apart`)."""
    os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


def run_client_phase(
    process: Callable[..., tuple[list[float], int]],
    target: Any,
    op: str,
    clients: int,
    procs: int,
    seconds: float,
    id_base: int,
    pid: int | None = None,
) -> dict[str, float]:
    """One phase of `clients` clients in at most `procs` forked processes, each running
    `process(target, op, its clients, id_base, start_at, stop_at)`, which returns its
    latencies in seconds (those that began after the warm-up) and its error count.

    The figures are `summary`'s in milliseconds, plus `rate` (per second), `errors` and, with
    `pid`, `cpu_ms`: that process's CPU (utime+stime) over the measured seconds per request.
    """
    groups = [list(range(p, clients, procs)) for p in range(min(procs, clients))]
    pool = multiprocessing.get_context("fork").Pool(len(groups))
    cpu = float("nan")
    try:
        start_at = time.monotonic() + 1.0  # every process started and connected
        stop_at = start_at + CLIENT_WARMUP + seconds
        pending = pool.starmap_async(
            process, [(target, op, g, id_base, start_at, stop_at) for g in groups]
        )
        if pid is not None:
            time.sleep(max(0.0, start_at + CLIENT_WARMUP - time.monotonic()))
            cpu = cpu_seconds(pid)
            time.sleep(max(0.0, stop_at - time.monotonic()))
            cpu = cpu_seconds(pid) - cpu
        results = pending.get(timeout=seconds + CLIENT_GRACE)
    except BaseException:
        # A client process that died (or a stop) leaves its task pending: join() would
        # wait for it forever.
        pool.terminate()
        raise
    # close() and join(), not terminate(): terminating a pool whose workers are idle can
    # hang on their task queue's lock.
    pool.close()
    pool.join()
    samples = [s for r, _ in results for s in r]
    figures = summary([s * 1000 for s in samples])
    figures["rate"] = len(samples) / seconds
    figures["errors"] = sum(e for _, e in results)
    figures["cpu_ms"] = cpu / len(samples) * 1000 if samples else float("nan")
    return figures


def trades_csv(rows: int) -> bytes:
    """A bulk import's body: `rows` trades of 100 symbols, 10 ms apart, from 2026-01-05."""
    base = datetime.datetime(2026, 1, 5, tzinfo=datetime.UTC).timestamp()
    lines = ["time,symbol,price,qty\n"]
    for i in range(rows):
        stamp = datetime.datetime.fromtimestamp(base + i * 0.01, datetime.UTC)
        lines.append(
            f"{stamp:%Y-%m-%dT%H:%M:%S.%fZ},S{i % 100:03d},{100 + i % 997 * 0.1:.1f},{i % 50 + 1}\n"
        )
    return "".join(lines).encode()


def alternate_children(
    script: str, codes: Sequence[Path], runs: int, arguments: Sequence[str]
) -> dict[Path, list[dict[str, Any]]]:
    """Run `script --child *arguments` `runs` times under each checkout in turn (its refimpl
    first on the path, then this folder); each child prints its figures as JSON on its last
    line. A child that fails ends the bench with its error output."""
    results: dict[Path, list[dict[str, Any]]] = {code: [] for code in codes}
    for _ in range(runs):
        for code in codes:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(code), str(_HERE)]))
            done = subprocess.run(
                [sys.executable, script, "--child", *arguments],
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if done.returncode != 0:
                raise SystemExit(f"{code}: {done.stderr[-2000:]}")
            results[code].append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


# --- a lean HTTP client for load generators ------------------------------------------------


class LeanHTTP:
    """One keep-alive HTTP/1.1 connection: a request out, the whole answer in, nothing more.

    The load generators share the benchmark machine with the server. `requests` spends about
    0.3 ms of CPU on each small request (more than a point SELECT costs the server), which
    PostgreSQL's clients do not pay; this client spends a few tens of microseconds, so the
    figures measure the server rather than the client. It reads `Content-Length` and chunked
    bodies, and reconnects when the server closed the connection.
    """

    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        rest = url.split("://", 1)[1].rstrip("/")
        host, _, port = rest.partition(":")
        self.address = (host, int(port or 80))
        self.fixed = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        self.sock: socket.socket | None = None
        self.buffer = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=120)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock, self.buffer = sock, b""
        return sock

    def request(
        self, method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request; (status, lower-cased headers, body)."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
        head = (
            f"{method} {target} HTTP/1.1\r\nHost: {self.address[0]}\r\n{self.fixed}{extra}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("latin-1")
        for attempt in (0, 1):
            sock = self.sock or self._connect()
            try:
                sock.sendall(head + body)
                return self._read_answer(sock)
            except (ConnectionError, EOFError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _fill(self, sock: socket.socket) -> None:
        chunk = sock.recv(262144)
        if not chunk:
            raise EOFError("the server closed the connection")
        self.buffer += chunk

    def _read_answer(self, sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
        while b"\r\n\r\n" not in self.buffer:
            self._fill(sock)
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            size = int(headers["content-length"])
            while len(self.buffer) < size:
                self._fill(sock)
            body, self.buffer = self.buffer[:size], self.buffer[size:]
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            parts = []
            while True:
                while b"\r\n" not in self.buffer:
                    self._fill(sock)
                line, _, self.buffer = self.buffer.partition(b"\r\n")
                size = int(line.split(b";")[0], 16)
                while len(self.buffer) < size + 2:
                    self._fill(sock)
                parts.append(self.buffer[:size])
                self.buffer = self.buffer[size + 2 :]
                if size == 0:
                    break
            body = b"".join(parts)
        else:
            raise ValueError("an answer without Content-Length or chunked encoding")
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, headers, body

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock, self.buffer = None, b""


# --- refimpl server -------------------------------------------------------------------------

# Runs `refimpl serve` with each worker thread's request handling under a cProfile.Profile of
# its own, merged into one file at the stop. `python -m cProfile -m refimpl serve` alone
# profiles the main thread only (the accept loop), never the threads that answer requests.
PROFILE_LAUNCHER = """
import cProfile, pstats, sys, threading
from refimpl.http.serving import server
out = sys.argv[1]
profiles, local = [], threading.local()
answer = server.PooledWSGIServer._answer
def profiled(self, *args):
    profile = getattr(local, "profile", None)
    if profile is None:
        profile = local.profile = cProfile.Profile()
        profiles.append(profile)
    profile.enable()
    try:
        return answer(self, *args)
    finally:
        profile.disable()
server.PooledWSGIServer._answer = profiled
from refimpl.cli import main
try:
    status = main(sys.argv[2:])
finally:
    if profiles:
        stats = pstats.Stats(profiles[0])
        for profile in profiles[1:]:
            stats.add(profile)
        stats.dump_stats(out)
sys.exit(status)
"""


class RefimplServer:
    """`python -m refimpl serve` on loopback, in its own process; a context manager."""

    def __init__(
        self,
        threads: int = 16,
        *,
        data: Path | None = None,
        sample: bool = False,
        profile: Path | None = None,
        env: dict[str, str] | None = None,
        extra: Sequence[str] = (),
        launcher: str | None = None,
        code: Path | None = None,
    ) -> None:
        self.threads = threads
        # The checkout whose refimpl runs (another revision's, in `versions.py`); this one's
        # by default.
        self.code = REPO if code is None else Path(code)
        self._own_data = data is None
        self.data = Path(tempfile.mkdtemp(prefix="kdb-bench-")) if data is None else Path(data)
        self.sample = sample
        self.profile = profile
        # With `profile`: the code that starts the server (its first argument is that path).
        self.launcher = launcher or PROFILE_LAUNCHER
        self.env = env or {}
        self.extra = list(extra)
        self.process: subprocess.Popen[str] | None = None
        self.token = ""
        self.url = ""
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    # -- life ------------------------------------------------------------------------------

    def start(self, timeout: float = 300.0) -> RefimplServer:
        args = [
            "serve",
            "--data",
            str(self.data),
            "--host",
            LOOPBACK,
            "--port",
            "0",
            "--threads",
            str(self.threads),
            *self.extra,
        ]
        if self.sample:
            args.append("--sample")
        if self.profile is not None:
            command = [sys.executable, "-c", self.launcher, str(self.profile), *args]
        else:
            command = [sys.executable, "-m", "refimpl", *args]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.code), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])]
        )
        env.update(self.env)
        self.process = subprocess.Popen(
            command,
            cwd=self.code,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        token_file = self.data / "admin.token"
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while not self.url:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError("the server stopped before listening:\n" + "".join(self.output))
            self.output.append(line)
            if line.startswith("admin token: "):
                self.token = line.split(":", 1)[1].strip()
            elif line.startswith("listening on "):
                self.url = line.split("listening on ", 1)[1].strip()
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the server did not listen in time")
        if not self.token and token_file.exists():
            self.token = token_file.read_text().strip()  # a reused data folder
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()
        return self

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)
            del self.output[:-200]

    def stop(self, timeout: float = 120.0, delete: bool = True) -> None:
        process = self.process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.process = None
        if delete and self._own_data:
            shutil.rmtree(self.data, ignore_errors=True)

    def __enter__(self) -> RefimplServer:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- use -------------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def sql(self, text: str, session: requests.Session | None = None) -> dict[str, Any]:
        """Run SQL through POST /exec; the JSON answer, or RuntimeError with the server's."""
        http = session or requests
        response = http.post(
            f"{self.url}/exec",
            data=text.encode("utf-8"),
            headers={**self.headers, "Content-Type": "text/plain"},
            timeout=600,
        )
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:500]}")
        return response.json()

    def import_csv(self, table: str, text: str) -> dict[str, Any]:
        response = requests.post(
            f"{self.url}/imp",
            params={"table": table},
            data=text.encode("utf-8"),
            headers={**self.headers, "Content-Type": "text/csv"},
            timeout=3600,
        )
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {response.text[:500]}")
        return response.json()

    def stats(self) -> dict[str, Any]:
        response = requests.get(f"{self.url}/api/stats", headers=self.headers, timeout=60)
        response.raise_for_status()
        return response.json()


# --- PostgreSQL -----------------------------------------------------------------------------


def postgres_bin() -> Path:
    """The folder of initdb and pg_ctl; Debian's postgresql is installed when missing."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        print("installing PostgreSQL (Debian package postgresql) ...", flush=True)
        install = ["apt-get", "install", "-y", "-q", "postgresql"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(install, env=env, stdout=subprocess.DEVNULL).returncode != 0:
            subprocess.run(
                ["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL, check=True
            )
            subprocess.run(install, env=env, stdout=subprocess.DEVNULL, check=True)
        found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not found:
            raise RuntimeError("no initdb after installing postgresql")
    return Path(found[-1]).parent


class Postgres:
    """A throwaway PostgreSQL cluster on loopback; a context manager.

    fsync and synchronous_commit are on (the defaults). `settings` adds `-c name=value`.
    """

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = {"max_connections": "300", "shared_buffers": "256MB", **(settings or {})}
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
                    str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"
                )
            except RuntimeError as exc:
                print(f"warning: {exc}", file=sys.stderr)
            self._started = False
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Postgres:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


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

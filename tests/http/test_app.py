"""The WSGI application in-process: what a request leaves behind."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from wsgiref.types import StartResponse

import pytest
from werkzeug.test import EnvironBuilder

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.storage import bulk
from refimpl.engine.storage.database import Database
from refimpl.http import csvimport
from refimpl.http.app import App, AppOptions


def recording(statuses: list[str]) -> StartResponse:
    """A WSGI start_response that appends each status it is given to `statuses`."""

    def start(
        status: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        statuses.append(status)
        return lambda _data: None

    return start


def test_requests_leave_no_reference_cycles(tmp_path: Path) -> None:
    # Cyclic garbage is freed only by the collector's full passes, which stop every thread
    # for tens of milliseconds: a request must be freed by reference counting alone. Counted
    # in a process of its own: what an earlier test's server left (a waiting room and its
    # thread, a flusher and its thread, holding each other) becomes garbage when those
    # threads end, which they do a moment after its shutdown, inside this count's window
    # when the machine is loaded (found in one process over tests/http: 62, 373, 97 objects).
    counted = subprocess.run(
        [sys.executable, "-c", _COUNT_CYCLES, str(tmp_path)],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert counted.returncode == 0, counted.stderr[-3000:]
    assert counted.stdout.split() == ["cycles", "0"], counted.stdout


_COUNT_CYCLES = (
    "import sys; from pathlib import Path; from tests.http.test_app import request_cycles;"
    " print('cycles', request_cycles(Path(sys.argv[1])))"
)


def request_cycles(tmp_path: Path) -> int:
    """The objects in reference cycles that 20 INSERTs, three SELECTs and two reads of the
    change stream and the revision over the app leave, found by one collection."""
    instance = Instance.open(tmp_path)
    app = App(instance, AppOptions(dev=True))
    try:
        texts = ["CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)"]
        texts += [f"INSERT INTO t VALUES ({n}, {n / 2})" for n in range(20)]
        texts += ["SELECT * FROM t WHERE id = 3", "SELECT nonsense", "SELECT count(*) FROM t"]
        environs = [
            EnvironBuilder(
                path="/exec",
                method="POST",
                data=text.encode(),
                headers=[("Content-Type", "text/plain")],
            ).get_environ()
            for text in texts
        ]
        for _ in range(2):
            environs.append(
                EnvironBuilder(
                    path="/api/changes", query_string="table=t&format=json"
                ).get_environ()
            )
            environs.append(EnvironBuilder(path="/api/rev").get_environ())
        statuses: list[str] = []

        def call(environ: dict) -> None:
            b"".join(app(environ, recording(statuses)))

        # Werkzeug's route matching leaves a cycle; the app remembers a route after its
        # first request, so only first requests of a route pay it.
        call(environs.pop())
        call(environs.pop())
        call(environs.pop(0))  # the CREATE TABLE
        while gc.collect():  # what earlier tests left too, freed in passes of its own
            pass
        gc.disable()
        try:
            for environ in environs:
                call(environ)
            del environ, environs
            found = gc.collect()
        finally:
            gc.enable()
        assert statuses[3].startswith("200") and any(s.startswith("400") for s in statuses)
        return found
    finally:
        app.begin_shutdown()
        instance.close()


def test_guards_answer_before_any_route_runs(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    app = App(instance, AppOptions(dev=True, allowed_hosts=("db.example", "::1")))
    try:

        def call(method: str, path: str, headers: dict[str, str], sql: str = "") -> str:
            statuses: list[str] = []
            query = {"query": sql} if sql and method == "GET" else None
            environ = EnvironBuilder(
                path=path,
                method=method,
                headers=list(headers.items()),
                query_string=query,
                data=sql.encode() if method == "POST" else None,
                content_type="text/plain",
            ).get_environ()
            b"".join(app(environ, recording(statuses)))
            return statuses[0][:3]

        create = "CREATE TABLE t (id INT)"
        assert call("POST", "/exec", {"Host": "localhost"}, create) == "400"
        assert call("POST", "/exec", {"Host": "evil.example:80"}, create) == "400"
        assert call("POST", "/exec", {"Host": "DB.example.:9000"}, create) == "200"
        assert call("GET", "/health", {"Host": "[::1]:9000"}) == "200"
        host = {"Host": "db.example"}
        assert call("HEAD", "/exec", host, "DROP TABLE t") == "405"
        assert (
            call("POST", "/exec", {**host, "Origin": "http://db.example.evil"}, "DROP TABLE t")
            == "403"
        )
        assert call("GET", "/exec", {**host, "Origin": "http://db.example"}, "SHOW TABLES") == "200"
        assert instance.has_database("demo") and call("HEAD", "/health", host) == "200"
        session = instance.session("demo", ADMIN)
        assert session.execute("SHOW TABLES").rows == [("t", "table")]
    finally:
        app.begin_shutdown()
        instance.close()


def test_an_import_converts_and_loads_with_quick_switches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads woken while /imp converts and loads its rows (a request, a commit) wait a
    short switch interval for the interpreter lock; the server's is back after the import,
    whether it loaded or stopped at a bad row."""
    seen: list[tuple[str, float]] = []
    batches, load_rows = csvimport.CsvImport.batches, Database.load_rows

    def watched_batches(self: csvimport.CsvImport, size: int = 2) -> Iterator[list[tuple]]:
        for batch in batches(self, size):
            seen.append(("convert", sys.getswitchinterval()))
            yield batch

    def watched_load(self: Database, *args: object) -> object:
        seen.append(("load", sys.getswitchinterval()))
        return load_rows(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(csvimport.CsvImport, "batches", watched_batches)
    # A row read at a time, so that each import's rows make more than one batch of 2.
    monkeypatch.setattr(csvimport, "CONVERT_ROWS", 1)
    monkeypatch.setattr(Database, "load_rows", watched_load)
    server = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)  # as `refimpl serve` sets it
    instance = Instance.open(tmp_path)
    app = App(instance, AppOptions(dev=True))
    try:
        statuses: list[str] = []
        for path, body in (
            ("/exec", b"CREATE TABLE t (id BIGINT, v DOUBLE)"),
            ("/imp?table=t", b"id,v\n1,0.5\n2,1.5\n3,2.5\n"),
            ("/imp?table=t", b"id,v\n4,0.5\n5,1.5\n6,cheap\n"),
        ):
            path, _, query = path.partition("?")
            environ = EnvironBuilder(
                path=path, method="POST", query_string=query, data=body
            ).get_environ()
            b"".join(app(environ, recording(statuses)))
            assert sys.getswitchinterval() == pytest.approx(0.0005)
        assert [s[:3] for s in statuses] == ["200", "200", "400"]
        assert [step for step, _ in seen] == ["convert", "convert", "load", "convert"]
        assert [interval for _, interval in seen] == pytest.approx([bulk.LOAD_SWITCH_SECONDS] * 4)
    finally:
        sys.setswitchinterval(server)
        app.begin_shutdown()
        instance.close()

"""The WSGI application in-process: what a request leaves behind."""

from __future__ import annotations

import gc
from pathlib import Path

from werkzeug.test import EnvironBuilder

from refimpl.engine.instance import Instance
from refimpl.http.app import App, AppOptions


def test_requests_leave_no_reference_cycles(tmp_path: Path) -> None:
    # Cyclic garbage is freed only by the collector's full passes, which stop every thread
    # for tens of milliseconds: a request must be freed by reference counting alone.
    instance = Instance.open(tmp_path)
    app = App(instance, AppOptions(dev=True))
    try:
        texts = ["CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)"]
        texts += [f"INSERT INTO t VALUES ({n}, {n / 2})" for n in range(20)]
        texts += ["SELECT * FROM t WHERE id = 3", "SELECT nonsense", "SELECT count(*) FROM t"]
        environs = [
            EnvironBuilder(path="/exec", method="POST", data=text.encode(),
                           headers={"Content-Type": "text/plain"}).get_environ()
            for text in texts
        ]
        for _ in range(2):
            environs.append(EnvironBuilder(path="/api/changes", query_string="table=t&format=json")
                            .get_environ())
            environs.append(EnvironBuilder(path="/api/rev").get_environ())
        statuses: list[str] = []

        def call(environ: dict) -> None:
            b"".join(app(environ, lambda status, headers, exc=None: statuses.append(status)))

        # Werkzeug's route matching leaves a cycle; the app remembers a route after its
        # first request, so only first requests of a route pay it.
        call(environs.pop())
        call(environs.pop())
        call(environs.pop(0))  # the CREATE TABLE
        gc.collect()
        gc.disable()
        try:
            for environ in environs:
                call(environ)
            del environ, environs
            found = gc.collect()
        finally:
            gc.enable()
        assert statuses[3].startswith("200") and any(s.startswith("400") for s in statuses)
        assert found == 0
    finally:
        app.begin_shutdown()
        instance.close()

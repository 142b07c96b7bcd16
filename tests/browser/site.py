"""A server for the browser tests: on a port that a restart keeps, serving a static folder
of test pages at /static/ (on its own origin), and SQL sent to it as another client."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any

import requests

from tests.http.conftest import Server, free_port, start_server

# The table of trades the browser tests chart and watch.
TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(symbol)"
)


class Site:
    """`refimpl serve` with `extra` arguments on a port of its own, its pages in `static`;
    a context manager that stops it (it must exit 0)."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.static = root / "static"
        self.static.mkdir(exist_ok=True)
        self.data = root / "data"
        self.port = free_port()
        self.extra = extra
        self.server = self._start()
        self.token = self.server.token

    def _start(self) -> Server:
        port = ("--port", str(self.port))
        return start_server(self.data, *port, "--static", str(self.static), *self.extra)

    def __enter__(self) -> Site:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        assert self.server.stop() == 0

    def restart(self) -> None:
        assert self.server.stop() == 0
        self.server = self._start()

    def add_page(self, name: str, html: str) -> None:
        """A page at /static/`name` (served from the folder as it is at each request)."""
        (self.static / name).write_text(html, encoding="utf-8")

    def page_url(self, name: str) -> str:
        """The page's address, the admin token in its fragment (never sent to the server)."""
        return f"{self.server.url}/static/{name}#{self.token}"

    def sql(self, text: str, database: str | None = None) -> dict[str, Any]:
        answer = requests.post(
            self.server.url + "/exec",
            params={"db": database} if database else {},
            data=text.encode(),
            timeout=30,
            headers={"Authorization": f"Bearer {self.token}"},
        )
        assert answer.status_code == 200, answer.text
        return answer.json()

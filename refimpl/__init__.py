"""refimpl: a reference SQL time-series database with change features.

`connect(path)` opens a data folder for embedded use and returns a `Connection` whose
`execute(sql, params)` returns a `Result` (columns, rows, message, count).

Packages, bottom to top: `errors` (the one exception hierarchy; imports nothing of refimpl),
`sql` (parsing and printing; nothing of the engine), `engine` (in layers, see its
docstring), `waiting` (answers decided later; nothing of the engine or of a protocol
layer), and the protocol layers `http` and `pgwire` side by side (neither imports the
other; both wait through `waiting`), over `netlimits` and `netpool` (connection limits and
the workers both servers share); `settings`, `commands`, `cli` and `sample` sit on top.
`shell` (`refimpl sql`) and `sqllogictest` are clients: the first of the embedded API or
of a server, the second of a server's HTTP API only. This module is the embedded
API and may import the engine's `instance`, `session`, `options` and `result`, never a
protocol layer. `tests/test_layout.py` checks the rules.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from refimpl.engine.instance import DEFAULT_DATABASE, Instance
from refimpl.engine.options import EngineOptions
from refimpl.engine.result import Result
from refimpl.engine.session import Session

__all__ = ["Connection", "EngineOptions", "Result", "connect"]


class Connection:
    """An embedded connection: the admin user on one database of a data folder.

    `execute` may be called from many threads: each thread gets its own session, so one
    thread's open transaction is its own.
    """

    def __init__(self, instance: Instance, database: str) -> None:
        self.instance = instance
        self.database = database
        self._local = threading.local()

    def session(self) -> Session:
        """A new session of its own (for a caller that manages threads itself)."""
        return self.instance.session(self.database)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        session = getattr(self._local, "session", None)
        if session is None:
            session = self.session()
            self._local.session = session
        return session.execute(sql, params)

    def close(self) -> None:
        self.instance.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    path: str | Path, database: str = DEFAULT_DATABASE, options: EngineOptions | None = None
) -> Connection:
    """Open the data folder at `path` (created if missing) for embedded use."""
    instance = Instance.open(Path(path), options)
    instance.database(database)
    return Connection(instance, database)

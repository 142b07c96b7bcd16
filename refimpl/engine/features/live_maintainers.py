"""Which live queries a server keeps maintainers for, and what maintaining costs.

One `Maintainer` (`live_maintain`) per query and database serves every subscription of
that query. They are kept while used, within bounds of count and of rows kept; one dropped
reads its table again when next asked. The CPU time spent bringing answers up to date is
counted here (spec: subscribe, its `maintenance_cpu_us`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from refimpl.engine.features.live_answers import LiveAnswer
from refimpl.engine.features.live_maintain import Maintainer, NotMaintained
from refimpl.errors import KdbError
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


class Maintainers:
    """The maintainers of a server's live queries, one per query and database, kept while
    used: at most `size`, and while together they keep at most `rows` rows (the query asked
    for longest ago goes first and is read again when next asked). Counts the CPU time spent
    bringing answers up to date."""

    def __init__(self, size: int = 4096, rows: int = 2_000_000, max_rows: int = 10_000) -> None:
        self._size = size
        self._rows = rows
        self._max_rows = max_rows
        self._lock = threading.Lock()
        self._kept: OrderedDict[Hashable, Maintainer] = OrderedDict()
        self._held = 0  # rows kept by the maintainers in `_kept`
        self.cpu_seconds = 0.0
        self.answers = 0
        self.rebuilds = 0

    def admits(self, session: StatementContext, select: ast.Select) -> bool:
        """True when `select` is maintained (else it is run again at each commit)."""
        return self._find(session, select) is not None

    def answer(
        self,
        session: StatementContext,
        select: ast.Select,
        applied: int,
        token: int,
        serial: Callable[[], int],
    ) -> LiveAnswer | None:
        """`select`'s answer from its maintainer (see `Maintainer.answer`); None: run it."""
        maintainer = self._find(session, select)
        if maintainer is None:
            return None
        started = time.thread_time()
        held, rebuilds = maintainer.held, maintainer.rebuilds
        try:
            return maintainer.answer(session.deadline(), applied, token, serial)
        finally:
            with self._lock:
                self.cpu_seconds += time.thread_time() - started
                self.answers += 1
                self.rebuilds += maintainer.rebuilds - rebuilds
                if self._kept.get((session.database, select)) is maintainer:
                    self._held += maintainer.held - held
                    self._bound(maintainer)

    def _find(self, session: StatementContext, select: ast.Select) -> Maintainer | None:
        database = session.database
        # Keyed by the database itself (hashed by identity, kept alive by the key): a
        # dropped database's reused id() can never find its maintainer.
        key = (database, select)
        source = select.source
        assert isinstance(source, ast.TableSource)
        table = database.tables.get(source.name.lower())
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                if table is not None and found.schema is table.schema:
                    self._kept.move_to_end(key)
                    return found
        if table is None:
            return None
        try:
            made = Maintainer(database, select, table, session.sql_functions(), self._max_rows)
        except (NotMaintained, KdbError):
            return None
        with self._lock:
            replaced = self._kept.pop(key, None)
            if replaced is not None:
                self._held -= replaced.held
            self._kept[key] = made
            self._bound(made)
        return made

    def _bound(self, keep: Maintainer) -> None:
        """Drop the maintainers asked for longest ago (never `keep`) beyond the bounds."""
        kept = self._kept
        while len(kept) > self._size or self._held > self._rows:
            oldest = next((k for k, m in kept.items() if m is not keep), None)
            if oldest is None:
                return
            self._held -= kept.pop(oldest).held

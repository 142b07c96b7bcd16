"""Functions of the caller's session (`version()`, `current_user()`, `kdb_rev`, ...): one
table an instance makes once, whose compiled calls find the session they answer for when
they run, not when they are compiled.

A builder takes the call, the scope and `session`, what gives the session a compiled call
runs for: it calls `session()` only inside the evaluator it returns, never while compiling,
so that its plan holds no value nor right of any session. Two ways to give it:
- `SessionFunctions.bound(table, context)`: every call runs for `context` (a statement
  compiled and run at once, or a live query kept for its subscriber's session);
- `SessionSlot`: a plan kept for every session (the database's plan cache) runs for the one
  its runner names, in the runner's thread (`SessionSlot.run`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from refimpl.engine.query.compiled import Compiled, Scope
from refimpl.sql import ast

C = TypeVar("C")
R = TypeVar("R")

# What gives a compiled call the session it runs for.
SessionOf = Callable[[], C]
# A builder of the instance's table: the call, the scope, and what gives the session.
SessionBuilder = Callable[[ast.FuncCall, Scope, SessionOf[Any]], Compiled]


class SessionFunctions(Mapping[str, Callable[[ast.FuncCall, Scope], Compiled]]):
    """The instance's table of session functions as one compile sees it: a scope's
    `functions`, each builder given `session`. Made in O(1): no builder is copied."""

    __slots__ = ("table", "session")

    def __init__(self, table: Mapping[str, SessionBuilder], session: SessionOf[Any]) -> None:
        self.table = table
        self.session = session

    @classmethod
    def bound(cls, table: Mapping[str, SessionBuilder], context: object) -> SessionFunctions:
        """`table` whose every call runs for `context`."""
        return cls(table, lambda: context)

    def __getitem__(self, name: str) -> Callable[[ast.FuncCall, Scope], Compiled]:
        builder, session = self.table[name], self.session
        return lambda call, scope: builder(call, scope, session)

    def __contains__(self, name: object) -> bool:
        return name in self.table

    def __iter__(self) -> Iterator[str]:
        return iter(self.table)

    def __len__(self) -> int:
        return len(self.table)


class SessionSlot(Generic[C]):
    """The session a kept plan's calls run for: each thread's own, named by `run` for the
    length of one run; a call outside a run raises (it never answers for a session it was
    not run for)."""

    __slots__ = ("_local",)

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self) -> C:
        context: C | None = getattr(self._local, "context", None)
        if context is None:
            raise RuntimeError("a session's function called outside a run naming its session")
        return context

    def run(self, context: C, work: Callable[[], R]) -> R:
        """`work()`, its session functions' calls answering for `context` in this thread
        (a run inside it, of the same plan, names its own and gives this one back)."""
        local = self._local
        outer = getattr(local, "context", None)
        local.context = context
        try:
            return work()
        finally:
            local.context = outer

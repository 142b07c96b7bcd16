"""A SELECT whose rows are taken under the database's state lock and read after it.

`run_select` runs a whole SELECT, so a caller holding the state lock around it holds it for
the scan, the ORDER BY's sort and the GROUP BY's groups too, and every commit waits
meanwhile. A SELECT without subqueries, now() or functions of the caller's session (a plan
`plan_key` keys: its answer depends on the rows its access path gives alone) needs of the
tables only those rows: `prepare_select` takes them (the caller holds the lock), as a
committed table's scan gives them, in O(partitions + blocks) and as they are at that
moment (`Table.scan`); `PreparedSelect.finish` reads them, filters them by its WHERE and
makes the answer of them after the caller has let the lock go. The answer is the one the
state under the lock gives, whatever commits meanwhile: rows are tuples, never changed in
place. A LIMIT without ORDER BY or GROUP BY still stops the read early.

Any other SELECT runs whole in `prepare_select`.

    with database.state_lock:
        prepared = prepare_select(select, CommittedTable(table, alias), params, now, ...)
    output = prepared.finish()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from refimpl.engine.query.compiled import Compiled
from refimpl.engine.query.relations import bounded
from refimpl.engine.query.select import (
    QueryOutput,
    RowSource,
    SelectPlan,
    compile_select,
    plan_key,
    run_select,
)
from refimpl.engine.tracking.plan_cache import PlanCache
from refimpl.sql import ast


@dataclass(slots=True)
class PreparedSelect:
    """A SELECT taken and not yet finished (`plan` and the rows its access path gives, not
    yet read nor filtered by its WHERE), or its answer (`output`, once finished)."""

    plan: SelectPlan | None
    rows: Iterable[Sequence[Any]]
    output: QueryOutput | None
    deadline: float | None = None

    def finish(self) -> QueryOutput:
        """The answer; no lock is needed (raises what the SELECT's answer raises, its WHERE's
        errors included; stops at the deadline while reading). The rows are read once: a
        later call gives the answer the first made."""
        if self.output is not None:
            return self.output
        plan = self.plan
        assert plan is not None
        rows: Iterator[Sequence[Any]] = bounded(self.rows, self.deadline)
        predicate = plan.predicate
        if predicate is not None:
            rows = (row for row in rows if predicate(row) is True)
        self.output = QueryOutput(*plan.finish(rows))
        self.rows = []  # read: the blocks they were taken from may go
        return self.output


def prepare_select(
    select: ast.Select,
    source: RowSource,
    params: Sequence[Any],
    now: int,
    functions: Mapping[str, Callable[..., Compiled]] | None = None,
    deadline: float | None = None,
    plans: PlanCache | None = None,
) -> PreparedSelect:
    """`run_select(select, source, ...)` up to what needs the tables (see the module
    docstring); the caller holds the state lock. `source.rows` gives rows that stay as they
    are once the lock is let go (a committed table's: see `Table.scan`)."""
    key = plan_key(select, source, params, functions)
    if key is None:
        output = run_select(select, source, params, now, functions, deadline, plans=plans)
        return PreparedSelect(None, [], output)
    found = None if plans is None else plans.get(key, source.schema)
    if isinstance(found, SelectPlan):
        plan = found
    else:
        plan = compile_select(select, source, params, now, functions)
        if plans is not None:
            plans.put(key, source.schema, plan)
    if plan.hints is None:
        return PreparedSelect(None, [], plan.run(source, deadline))
    # Only the rows of its access path are taken under the lock, not read: the scan, and its
    # WHERE, a client's expression of any cost per row, run after the lock is let go, so
    # that a commit (and every reader queued behind it) never waits for them.
    rows = source.rows(plan.hints) if plan.reads else []
    return PreparedSelect(plan, rows, None, deadline)

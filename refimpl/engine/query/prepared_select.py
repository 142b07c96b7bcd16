"""A SELECT whose rows are read under the database's state lock and ordered after it.

`run_select` runs a whole SELECT, so a caller holding the state lock around it holds it for
the ORDER BY's sort and the GROUP BY's groups too, and every commit waits meanwhile. Once
the rows its access path gives are read, a SELECT without subqueries, now() or functions of
the caller's session (a plan `plan_key` keys: its answer depends on those rows alone) needs
nothing of the tables any more: `prepare_select` reads them (the caller holds the lock)
and `PreparedSelect.finish` filters them by its WHERE and makes the answer of them after
the caller has let it go. The
answer is the one the state read under the lock gives, whatever commits meanwhile: rows
are tuples, never changed in place.

Any other SELECT, and one with a LIMIT but without ORDER BY or GROUP BY (whose LIMIT
stops the read early), runs whole in `prepare_select`.

    with database.state_lock:
        prepared = prepare_select(select, CommittedTable(table, alias), params, now, ...)
    output = prepared.finish()
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
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


@dataclass(frozen=True, slots=True)
class PreparedSelect:
    """A SELECT read and not yet finished (`plan` and the rows its access path gave, not yet
    filtered by its WHERE), or its answer (`output`)."""

    plan: SelectPlan | None
    rows: list[Sequence[Any]]
    output: QueryOutput | None
    deadline: float | None = None

    def finish(self) -> QueryOutput:
        """The answer; no lock is needed (raises what the SELECT's answer raises, its WHERE's
        errors included; stops at the deadline while filtering)."""
        if self.output is not None:
            return self.output
        plan = self.plan
        assert plan is not None
        rows: Iterator[Sequence[Any]] = iter(self.rows)
        predicate = plan.predicate
        if predicate is not None:
            rows = (row for row in bounded(rows, self.deadline) if predicate(row) is True)
        return QueryOutput(*plan.finish(rows))


def prepare_select(
    select: ast.Select,
    source: RowSource,
    params: Sequence[Any],
    now: int,
    functions: dict[str, Callable[..., Compiled]] | None = None,
    deadline: float | None = None,
    plans: PlanCache | None = None,
) -> PreparedSelect:
    """`run_select(select, source, ...)` up to what needs the tables (see the module
    docstring); the caller holds the state lock. Stops at `deadline` while reading."""
    key = plan_key(select, source, params, functions)
    # A LIMIT without ORDER BY or GROUP BY stops the read early: such a SELECT runs whole.
    whole = select.limit is not None and not (select.order_by or select.group_by)
    if key is None or whole:
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
    # Only the rows of its access path are taken under the lock; its WHERE, a client's
    # expression of any cost per row, filters them after the lock is let go, so that a
    # commit (and every reader queued behind it) never waits for a scan's WHERE.
    rows = list(bounded(source.rows(plan.hints), deadline)) if plan.reads else []
    return PreparedSelect(plan, rows, None, deadline)

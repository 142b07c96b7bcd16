"""A SELECT whose rows are read under the database's state lock and ordered after it.

`run_select` runs a whole SELECT, so a caller holding the state lock around it holds it for
the ORDER BY's sort and the GROUP BY's groups too, and every commit waits meanwhile. Once
the rows its WHERE keeps are read, a SELECT without subqueries, now() or functions of the
caller's session (a plan `plan_key` keys: its answer depends on those rows alone) needs
nothing of the tables any more: `prepare_select` reads them (the caller holds the lock)
and `PreparedSelect.finish` makes the answer of them after the caller has let it go. The
answer is the one the state read under the lock gives, whatever commits meanwhile: rows
are tuples, never changed in place.

Any other SELECT, and one without ORDER BY or GROUP BY (whose LIMIT may stop the read
early), runs whole in `prepare_select`.

    with database.state_lock:
        prepared = prepare_select(select, CommittedTable(table, alias), params, now, ...)
    output = prepared.finish()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from refimpl.engine.query.compiled import Compiled
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
    """A SELECT read and not yet finished (`plan` and `rows`), or its answer (`output`)."""

    plan: SelectPlan | None
    rows: list[Sequence[Any]]
    output: QueryOutput | None

    def finish(self) -> QueryOutput:
        """The answer; no lock is needed (raises what the SELECT's answer raises)."""
        if self.output is not None:
            return self.output
        assert self.plan is not None
        return QueryOutput(*self.plan.finish(iter(self.rows)))


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
    if key is None or not (select.order_by or select.group_by):
        output = run_select(select, source, params, now, functions, deadline, plans=plans)
        return PreparedSelect(None, [], output)
    found = None if plans is None else plans.get(key, source.schema)
    if isinstance(found, SelectPlan):
        plan = found
    else:
        plan = compile_select(select, source, params, now, functions)
        if plans is not None:
            plans.put(key, source.schema, plan)
    return PreparedSelect(plan, plan.read(source, deadline), None)

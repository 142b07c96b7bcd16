"""A SELECT without FROM (`SELECT 1`, drivers' and pools' health checks, `SELECT version()`)
run as a table SELECT is: from a plan the database keeps, where one may be kept."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.select import (
    QueryOutput,
    SelectPlan,
    compile_select,
    plan_key,
    run_select,
)
from refimpl.engine.query.session_functions import SessionFunctions, SessionSlot
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def select_without_from(
    context: StatementContext, statement: ast.Select, params: Sequence[Any]
) -> QueryOutput:
    """A SELECT without FROM (`SELECT 1`, a driver's health check, `SELECT version()`) run by
    the plan the database's plan cache keeps for its statement and typed parameters,
    compiled at its first run. A plan holds no value of a run: the session's functions
    (`kdb_rev`, `current_user()`, `current_setting`) find the session a run names when they
    are called (`SessionPlan`), so each run answers its own caller, rights and revisions; a
    statement calling now() is compiled at every run (`plan_key`)."""
    # No key for a subquery, now(), a window or a set-returning call: `run_select` compiles
    # those (over the relation a window or a set needs) at every run.
    key = plan_key(statement, None, params, None)
    if key is None:
        return run_select(
            statement,
            None,
            params,
            context.transaction_time(),
            context.sql_functions(),
            context.deadline(),
        )
    plans = context.database.plan_cache
    found = plans.get(key, None)
    if isinstance(found, SelectPlan):
        return found.run(None, context.deadline())
    if isinstance(found, SessionPlan):
        return found.run(context)
    functions = context.sql_functions()  # only to compile: a kept plan needs none
    if plan_key(statement, None, params, functions) is not None:
        # It calls none of the session's functions, which every session has alike.
        plan = compile_select(statement, None, params, context.transaction_time())
        plans.put(key, None, plan)
        return plan.run(None, context.deadline())
    slot: SessionSlot[StatementContext] = SessionSlot()
    kept = SessionFunctions(functions.table, slot)
    made = SessionPlan(
        compile_select(statement, None, params, context.transaction_time(), kept), slot
    )
    plans.put(key, None, made)
    return made.run(context)


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """A plan calling the session's functions, kept for every session: each run names its
    session to the plan's calls (`slot`), in its own thread."""

    plan: SelectPlan
    slot: SessionSlot[StatementContext]

    def run(self, context: StatementContext) -> QueryOutput:
        plan, deadline = self.plan, context.deadline()
        return self.slot.run(context, lambda: plan.run(None, deadline))

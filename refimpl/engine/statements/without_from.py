"""A SELECT without FROM (`SELECT 1`, drivers' and pools' health checks, `SELECT version()`)
run as a table SELECT is: from a plan the database keeps, where one may be kept."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from refimpl.engine.query.select import (
    QueryOutput,
    SelectPlan,
    compile_select,
    plan_key,
    run_select,
)
from refimpl.sql import ast

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext


def select_without_from(
    context: StatementContext, statement: ast.Select, params: Sequence[Any]
) -> QueryOutput:
    """A SELECT without FROM (`SELECT 1`, a driver's health check) run by the plan the
    database's plan cache keeps for its statement and typed parameters, compiled at its
    first run. A plan holds no value of a run: one calling now() or a function of the
    caller's session (`kdb_rev`, `version()`, `current_setting`) is compiled at every run
    (`plan_key`), so each run answers its own moment, rights and revisions."""
    # Without the session's functions the key says only whether the statement may be kept
    # at all; a plan is put under it only once the statement is known to call none of the
    # session's functions, which every session has alike (`FunctionTables`): a hit needs no
    # function table. No key for a subquery, now(), a window or a set-returning call:
    # `run_select` compiles those (over the relation a window or a set needs) at every run.
    key = plan_key(statement, None, params, None)
    if key is None:
        return run_select(
            statement,
            None,
            params,
            time.time_ns() // 1000,
            context.sql_functions(),
            context.deadline(),
        )
    plans = context.database.plan_cache
    found = plans.get(key, None)
    if isinstance(found, SelectPlan):
        return found.run(None, context.deadline())
    functions = context.sql_functions()
    plan = compile_select(statement, None, params, time.time_ns() // 1000, functions)
    if plan_key(statement, None, params, functions) is not None:
        plans.put(key, None, plan)
    return plan.run(None, context.deadline())

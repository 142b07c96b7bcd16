"""What a live query may be, and how the rows of its answer are told apart.

A live query is `SUBSCRIBE` and one SELECT of one table (`parse_subscription` refuses the
rest with a message naming the limit); `identity_positions` chooses the columns that
identify a row of its answer (spec: subscribe, row identity).
"""

from __future__ import annotations

from refimpl.engine.query.expressions import contains_aggregate
from refimpl.engine.query.subqueries import has_subquery
from refimpl.errors import NotAllowed, NotASubscription, SqlError
from refimpl.sql import ast
from refimpl.sql.parser import parse_cached

# The documented limit of a live query, quoted by every refusal of a query beyond it.
ONE_TABLE = "a live query reads one table (no joins, subqueries in FROM, UNION or WITH)"


def beyond_one_table(query: ast.Query) -> str | None:
    """What of the query is beyond the limit of one table, in words; None if nothing."""
    if isinstance(query, ast.WithQuery):
        return "WITH"
    if isinstance(query, ast.SetOperation):
        return query.op
    if isinstance(query, ast.Values):
        return "VALUES instead of a table"
    if isinstance(query.source, ast.JoinSource):
        return "a JOIN"
    if isinstance(query.source, ast.SubquerySource):
        return "a subquery in FROM"
    if has_subquery(query):
        return "a subquery, which reads another table"
    return None


def parse_subscription(text: str) -> ast.Select:
    """The SELECT of `SUBSCRIBE SELECT ...`; errors that say what is allowed."""
    script = parse_cached(text)
    if len(script.statements) != 1:
        raise SqlError("a subscription is one SUBSCRIBE SELECT statement")
    statement = script.statements[0]
    if not isinstance(statement, ast.Subscribe):
        raise NotASubscription()  # the protocol layer names what took it
    select = statement.select
    shape = beyond_one_table(select)
    if shape is not None:
        raise NotAllowed(f"{ONE_TABLE}; this query has {shape}")
    assert isinstance(select, ast.Select)
    if not isinstance(select.source, ast.TableSource):
        raise NotAllowed("a subscription reads one table: SUBSCRIBE SELECT ... FROM <table>")
    if script.param_count:
        raise SqlError("a subscription takes no ? parameters; write the values in the query")
    return select


def identity_positions(select: ast.Select, key: tuple[str, ...]) -> list[int] | None:
    """Positions of the identity columns in the answer, or None for whole-row identity."""
    items = select.items
    if any(isinstance(item.expr, ast.Star) for item in items):
        return None
    if select.distinct:
        return None
    if not select.group_by and any(contains_aggregate(item.expr) for item in items):
        return []  # one row: it is its own identity
    if select.group_by:
        aliases = {item.alias.lower(): i for i, item in enumerate(items) if item.alias}
        positions = []
        for expr in select.group_by:
            found = None
            if isinstance(expr, ast.Literal) and expr.type == "INT":
                found = int(expr.value) - 1  # type: ignore[call-overload]
            elif isinstance(expr, ast.ColumnRef) and expr.name.lower() in aliases:
                found = aliases[expr.name.lower()]
            else:
                found = next((i for i, item in enumerate(items) if item.expr == expr), None)
            if found is None or not 0 <= found < len(items):
                return None
            positions.append(found)
        return positions
    if not key:
        return None
    positions = []
    for name in key:
        found = next(
            (
                i
                for i, item in enumerate(items)
                if isinstance(item.expr, ast.ColumnRef) and item.expr.name.lower() == name.lower()
            ),
            None,
        )
        if found is None:
            return None
        positions.append(found)
    return positions

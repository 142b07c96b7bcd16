"""Parse-tree reductions of queries: SELECT, joins, subqueries, set operations, WITH, views.

`QueryBuilder` is a part of `refimpl.sql.builder.Builder` (which inherits it), kept apart so
that each module stays one job: this one makes the query nodes of `refimpl.sql.ast`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from lark import Token, Transformer, v_args

from refimpl.errors import NotAllowed
from refimpl.sql import ast
from refimpl.sql.ast import Expr
from refimpl.sql.limits import check_depth


@dataclasses.dataclass(frozen=True, slots=True)
class SelectCore:
    """A SELECT before its query is known: ORDER BY and LIMIT belong to the whole query."""

    items: tuple[ast.SelectItem, ...]
    source: ast.Source | None
    where: Expr | None
    group_by: tuple[Expr, ...]
    having: Expr | None
    distinct: bool

    def select(
        self,
        order_by: tuple[ast.OrderItem, ...] = (),
        limit: Expr | None = None,
        offset: Expr | None = None,
    ) -> ast.Select:
        return ast.Select(
            self.items,
            self.source,
            self.where,
            self.group_by,
            self.having,
            order_by,
            limit,
            offset,
            self.distinct,
        )


def _query(part: SelectCore | ast.Query) -> ast.Query:
    return part.select() if isinstance(part, SelectCore) else part


@v_args(inline=True)
class QueryBuilder(Transformer):
    """The query reductions of the grammar (method names are its rule and alias names)."""

    ident: Callable[[Token], str]  # the name of an identifier token: `Builder` defines it

    def query(
        self,
        with_clause: tuple[bool, tuple[ast.CommonTable, ...]] | None,
        body: SelectCore | ast.Query,
        order_by: tuple[ast.OrderItem, ...] | None,
        limit_offset: tuple[Expr, Expr | None] | None,
    ) -> ast.Query:
        limit, offset = limit_offset or (None, None)
        # Before a Select exists: it hashes its whole tree as it is made.
        check_depth((body, order_by, limit_offset))
        order = order_by or ()
        query: ast.Query
        if isinstance(body, SelectCore):
            query = body.select(order, limit, offset)
        elif isinstance(body, ast.SetOperation):
            query = dataclasses.replace(body, order_by=order, limit=limit, offset=offset)
        elif order or limit_offset:
            # VALUES has no clauses of its own: ORDER BY and LIMIT select from it.
            source = ast.SubquerySource(body)
            query = ast.Select(
                (ast.SelectItem(ast.Star()),), source, None, (), None, order, limit, offset
            )
        else:
            query = body
        if with_clause is not None:
            recursive, tables = with_clause
            query = ast.WithQuery(tables, query, recursive)
        return query

    def select_core(
        self,
        distinct: bool | None,
        items: tuple[ast.SelectItem, ...],
        source: ast.Source | None,
        where: Expr | None,
        group_by: tuple[Expr, ...] | None,
        having: Expr | None,
    ) -> SelectCore:
        check_depth((items, source, where, group_by, having))
        return SelectCore(items, source, where, group_by or (), having, bool(distinct))

    def set_operation(
        self,
        left: SelectCore | ast.Query,
        operator: tuple[str, bool],
        right: SelectCore | ast.Values,
    ) -> ast.SetOperation:
        op, all_ = operator
        return ast.SetOperation(op, _query(left), _query(right), all_)

    def set_operator(self, *tokens: Token) -> tuple[str, bool]:
        # `!` keeps every token: ALL is the second, None when absent.
        return tokens[0].upper(), len(tokens) > 1 and tokens[1] is not None

    def with_clause(
        self, recursive: Token | None, *tables: ast.CommonTable
    ) -> tuple[bool, tuple[ast.CommonTable, ...]]:
        return recursive is not None, tables

    def common_table(
        self, name: str, columns: tuple[str, ...] | None, query: ast.Query
    ) -> ast.CommonTable:
        return ast.CommonTable(name, query, columns or ())

    def subscribe(self, query: ast.Query) -> ast.Subscribe:
        return ast.Subscribe(query)

    def comma_join(self, left: ast.Source, right: ast.Source) -> ast.JoinSource:
        return ast.JoinSource("CROSS", left, right, comma=True)

    def cross_join(self, left: ast.Source, right: ast.Source) -> ast.JoinSource:
        return ast.JoinSource("CROSS", left, right)

    def join(
        self,
        left: ast.Source,
        kind: str,
        right: ast.Source,
        spec: tuple[Expr | None, tuple[str, ...]],
    ) -> ast.JoinSource:
        on, using = spec
        return _after_comma(ast.JoinSource(kind, left, right, on, using))

    def natural_join(self, left: ast.Source, kind: str, right: ast.Source) -> ast.JoinSource:
        return _after_comma(ast.JoinSource(kind, left, right, natural=True))

    def lateral_source(self, token: Token, *rest: object) -> ast.Source:
        raise NotAllowed(
            f"line {token.line}, column {token.column}: LATERAL is not supported: a subquery"
            " or function in FROM cannot read the tables before it; join on a condition"
            " instead, or move the correlated part into the select list"
        )

    def inner_join(self) -> str:
        return "INNER"

    def left_join(self) -> str:
        return "LEFT"

    def right_join(self) -> str:
        return "RIGHT"

    def full_join(self) -> str:
        return "FULL"

    def join_on(self, expr: Expr) -> tuple[Expr | None, tuple[str, ...]]:
        return expr, ()

    def join_using(self, columns: tuple[str, ...]) -> tuple[Expr | None, tuple[str, ...]]:
        return None, columns

    def bare_alias(self, token: Token) -> str:
        return self.ident(token)

    def subquery_source(
        self, query: ast.Query, alias: str | None, columns: tuple[str, ...] | None
    ) -> ast.SubquerySource:
        return ast.SubquerySource(query, alias, columns or ())

    def in_subquery(self, operand: Expr, negated: bool | None, query: ast.Query) -> ast.InSubquery:
        return ast.InSubquery(operand, query, negated is not None)

    def in_table(self, operand: Expr, negated: bool | None, table: str) -> ast.InSubquery:
        # SQLite's `x IN t` is `x IN (SELECT * FROM t)`.
        query = ast.Select((ast.SelectItem(ast.Star()),), ast.TableSource(table))
        return ast.InSubquery(operand, query, negated is not None)

    def quantified(
        self, operand: Expr, op: str, quantifier: str, query: ast.Query
    ) -> ast.Quantified:
        return ast.Quantified(op, operand, quantifier, query)

    def quantifier(self, token: Token) -> str:
        word = token.upper()
        return "ANY" if word == "SOME" else word

    def scalar_subquery(self, query: ast.Query) -> ast.ScalarSubquery:
        return ast.ScalarSubquery(query)

    def exists(self, query: ast.Query) -> ast.Exists:
        return ast.Exists(query)

    def temporary(self) -> bool:
        return True

    def create_view(
        self, temporary: bool | None, if_not_exists: bool | None, name: str, query: ast.Query
    ) -> ast.CreateView:
        return ast.CreateView(name, query, if_not_exists is not None)

    def drop_view(self, if_exists: bool | None, name: str) -> ast.DropView:
        return ast.DropView(name, if_exists is not None)


def _after_comma(join: ast.JoinSource) -> ast.JoinSource:
    """`a, b RIGHT JOIN c ON ...` as PostgreSQL reads it: a comma binds looser than JOIN, so
    the join takes only the item after the comma. Where the grouping changes the answer (a
    RIGHT or FULL join; USING and NATURAL, whose names it resolves) the join moves under the
    comma; an INNER or LEFT join on an ON answers alike either way, and stays where SQLite's
    reading (left to right) lets its ON name every table before it."""
    left = join.left
    moves = join.kind in ("RIGHT", "FULL") or join.using or join.natural
    if not (isinstance(left, ast.JoinSource) and left.comma and moves):
        return join
    inner = _after_comma(dataclasses.replace(join, left=left.right))
    return dataclasses.replace(left, right=inner)

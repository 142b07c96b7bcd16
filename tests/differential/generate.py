"""Hypothesis strategies of schemas' rows and of queries in the grammar the spec documents:
joins of every kind and form, subqueries, set operations, GROUP BY and HAVING with qualified
and unqualified names, aggregates, CASE, NULLIF, COALESCE, casts, LIKE, IN, BETWEEN, ORDER BY
with LIMIT and OFFSET, NULLs everywhere. Every query is valid in PostgreSQL's dialect as
this spec writes it, or wrong there in a way both servers must refuse alike."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

# Three tables; names shared between them make NATURAL, USING and ambiguity meaningful.
SCHEMA: dict[str, list[tuple[str, str]]] = {
    "t0": [("k", "INT"), ("a", "INT"), ("b", "INT"), ("d", "DOUBLE"), ("s", "TEXT"), ("f", "BOOL")],
    "t1": [("k", "INT"), ("a", "INT"), ("c", "INT"), ("d", "DOUBLE"), ("s", "TEXT")],
    "t2": [("k", "INT"), ("b", "INT"), ("c", "INT"), ("f", "BOOL")],
}
SQL_TYPES = {"INT": "INT", "DOUBLE": "DOUBLE PRECISION", "TEXT": "TEXT", "BOOL": "BOOLEAN"}
_VALUES = {
    "INT": st.one_of(st.none(), st.integers(-3, 3)),
    "DOUBLE": st.one_of(st.none(), st.sampled_from([-1.5, 0.0, 0.5, 2.0, 3.25])),
    "TEXT": st.one_of(st.none(), st.sampled_from(["a", "b", "ab", "", "B", "a_b", "%"])),
    "BOOL": st.one_of(st.none(), st.booleans()),
}


def create_statements() -> list[str]:
    return [
        f"CREATE TABLE {t} ({', '.join(f'{c} {SQL_TYPES[k]}' for c, k in cols)})"
        for t, cols in SCHEMA.items()
    ]


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


@st.composite
def table_rows(draw: st.DrawFn) -> dict[str, list[tuple]]:
    return {
        table: draw(st.lists(st.tuples(*(_VALUES[k] for _, k in cols)), max_size=5))
        for table, cols in SCHEMA.items()
    }


@dataclass(frozen=True)
class Col:
    qualifier: str
    name: str
    type: str
    unique: bool  # the bare name means this column only

    def text(self, draw: st.DrawFn) -> str:
        if self.unique and draw(st.integers(0, 3)) == 0:
            return self.name
        return f"{self.qualifier}.{self.name}"


class Gen:
    """Draws expressions over the columns in scope."""

    def __init__(self, draw: st.DrawFn, scope: list[Col], depth: int = 0) -> None:
        self.draw = draw
        self.scope = scope
        self.depth = depth

    def pick(self, *options: str) -> str:
        return self.draw(st.sampled_from(options))

    def column(self, kind: str) -> str | None:
        found = [c for c in self.scope if c.type == kind]
        if not found:
            return None
        return self.draw(st.sampled_from(found)).text(self.draw)

    def expr(self, kind: str, budget: int = 2) -> str:
        draw = self.draw
        leaf = budget <= 0 or draw(st.integers(0, 2)) == 0
        if leaf:
            column = self.column(kind)
            if column is not None and draw(st.booleans()):
                return column
            value = draw(_VALUES[kind])
            # A NULL says its type, as a driver's typed parameter would: PostgreSQL cannot
            # choose abs() or upper() for a NULL of no type (42725), refimpl can.
            return f"CAST(NULL AS {SQL_TYPES[kind]})" if value is None else literal(value)
        sub = budget - 1
        if kind == "BOOL":
            return self.condition(sub)
        choice = draw(st.integers(0, 5))
        if choice == 0:
            return f"NULLIF({self.expr(kind, sub)}, {self.expr(kind, sub)})"
        if choice == 1:
            return f"COALESCE({self.expr(kind, sub)}, {self.expr(kind, sub)})"
        if choice == 2:
            return (
                f"CASE WHEN {self.condition(sub)} THEN {self.expr(kind, sub)}"
                f" ELSE {self.expr(kind, sub)} END"
            )
        if kind == "INT":
            op = self.pick("+", "-", "*", "/", "%")
            if choice == 5 and self.depth < 1 and draw(st.booleans()):
                # A scalar subquery: one row at most, or an error on both sides.
                limit = " LIMIT 1" if draw(st.integers(0, 3)) else ""
                return f"({self.subquery()}{limit})"
            if choice == 3:
                return f"({self.expr('INT', sub)} {op} {self.expr('INT', sub)})"
            if choice == 4:
                return f"abs({self.expr('INT', sub)})"
            return f"CAST({self.expr('INT', sub)} AS BIGINT)"
        if kind == "DOUBLE":
            if choice == 3:
                op = self.pick("+", "-", "*")
                return f"({self.expr('DOUBLE', sub)} {op} {self.expr('DOUBLE', sub)})"
            return f"CAST({self.expr('INT', sub)} AS DOUBLE PRECISION)"
        if choice == 3:
            return f"({self.expr('TEXT', sub)} || {self.expr('TEXT', sub)})"
        return f"{self.pick('upper', 'lower')}({self.expr('TEXT', sub)})"

    def condition(self, budget: int = 2) -> str:
        draw = self.draw
        sub = budget - 1
        choice = draw(st.integers(0, 11 if budget > 0 else 4))
        kind = draw(st.sampled_from(["INT", "INT", "TEXT", "DOUBLE"]))
        if choice <= 2:
            op = self.pick("=", "<>", "<", "<=", ">", ">=")
            return f"{self.expr(kind, sub)} {op} {self.expr(kind, sub)}"
        if choice == 3:
            column = self.column("BOOL")
            return column if column is not None else self.pick("TRUE", "FALSE")
        if choice == 4:
            return f"{self.expr(kind, sub)} IS {self.pick('', 'NOT ')}NULL"
        if choice == 5:
            return f"({self.condition(sub)} {self.pick('AND', 'OR')} {self.condition(sub)})"
        if choice == 6:
            return f"NOT ({self.condition(sub)})"
        if choice == 7:
            low, high = self.expr(kind, sub), self.expr(kind, sub)
            return f"{self.expr(kind, sub)} {self.pick('', 'NOT ')}BETWEEN {low} AND {high}"
        if choice == 8:
            items = ", ".join(self.expr("INT", 0) for _ in range(draw(st.integers(1, 3))))
            return f"{self.expr('INT', sub)} {self.pick('', 'NOT ')}IN ({items})"
        if choice == 9:
            pattern = literal(draw(st.sampled_from(["a%", "%b", "_", "a", "%", "a\\_b", "%a%"])))
            return f"{self.expr('TEXT', sub)} {self.pick('', 'NOT ')}LIKE {pattern}"
        if choice == 10 and self.depth < 1:
            return f"{self.pick('', 'NOT ')}EXISTS ({self.subquery()})"
        if self.depth < 1:
            return f"{self.expr('INT', sub)} {self.pick('', 'NOT ')}IN ({self.subquery()})"
        return self.pick("TRUE", "FALSE")

    def subquery(self) -> str:
        """One INT column of a table, filtered, maybe reading the outer query's columns."""
        draw = self.draw
        table = draw(st.sampled_from(sorted(SCHEMA)))
        alias = "q"
        inner = [Col(alias, c, k, False) for c, k in SCHEMA[table]]
        nested = Gen(draw, inner + [c for c in self.scope], self.depth + 1)
        ints = [c for c, k in SCHEMA[table] if k == "INT"]
        where = f" WHERE {nested.condition(1)}" if draw(st.booleans()) else ""
        return f"SELECT {alias}.{draw(st.sampled_from(ints))} FROM {table} AS {alias}{where}"


@st.composite
def from_clause(draw: st.DrawFn) -> tuple[str, list[Col]]:
    """A FROM clause and the columns it makes visible (USING and NATURAL leave theirs
    qualified only, which is still valid)."""
    count = draw(st.integers(1, 3))
    tables = [draw(st.sampled_from(sorted(SCHEMA))) for _ in range(count)]
    aliases = [f"x{i}" for i in range(count)]
    columns = [
        [Col(a, c, k, False) for c, k in SCHEMA[t]] for t, a in zip(tables, aliases, strict=True)
    ]
    names = [c.name for cols in columns for c in cols]
    scope = [
        Col(c.qualifier, c.name, c.type, names.count(c.name) == 1) for cols in columns for c in cols
    ]
    items = [f"{t} AS {a}" for t, a in zip(tables, aliases, strict=True)]
    if draw(st.integers(0, 4)) == 0:
        # The first item a subquery in FROM: the same columns, filtered, some renamed away.
        table = tables[0]
        inner = Gen(draw, [Col("y", c, k, False) for c, k in SCHEMA[table]], 1)
        listed = ", ".join(c for c, _ in SCHEMA[table])
        items[0] = f"(SELECT {listed} FROM {table} AS y WHERE {inner.condition(1)}) AS {aliases[0]}"
    text = items[0]
    seen = list(columns[0])
    for index in range(1, count):
        seen += columns[index]
        kind = draw(
            st.sampled_from(
                [
                    "JOIN",
                    "LEFT JOIN",
                    "RIGHT JOIN",
                    "FULL JOIN",
                    ",",
                    "CROSS JOIN",
                    "USING",
                    "NATURAL",
                ]
            )
        )
        if kind in (",", "CROSS JOIN"):
            text = f"{text}{kind if kind == ',' else ' ' + kind} {items[index]}"
            continue
        if kind == "USING":
            text = f"{text} {draw(st.sampled_from(['JOIN', 'LEFT JOIN']))} {items[index]} USING (k)"
            continue
        if kind == "NATURAL":
            text = f"{text} NATURAL {draw(st.sampled_from(['', 'LEFT ']))}JOIN {items[index]}"
            continue
        gen = Gen(draw, seen)
        left = [c for c in seen if c.qualifier != aliases[index] and c.type == "INT"]
        right = [c for c in columns[index] if c.type == "INT"]
        on = f"{draw(st.sampled_from(left)).qualifier}.{draw(st.sampled_from(left)).name}"
        pair = draw(st.sampled_from(left))
        on = f"{pair.qualifier}.{pair.name} = {aliases[index]}.{draw(st.sampled_from(right)).name}"
        if kind == "FULL JOIN" and draw(st.integers(0, 3)) == 0:
            on = on.replace(" = ", " < ")  # no equality: PostgreSQL refuses, refimpl answers
        elif draw(st.booleans()):
            on += f" AND {gen.condition(1)}"
        if index == 2 and "," not in text and draw(st.booleans()):
            # Parentheses around the first join.
            text = f"({text})"
        text = f"{text} {kind} {items[index]} ON {on}"
    return text, scope


@st.composite
def select_query(
    draw: st.DrawFn, width: int | None = None, kinds: list[str] | None = None
) -> tuple[str, bool]:
    """A SELECT; True when its ORDER BY fixes the order of every row."""
    source, scope = draw(from_clause())
    gen = Gen(draw, scope)
    grouped = width is None and draw(st.integers(0, 3)) == 0
    where = f" WHERE {gen.condition()}" if draw(st.booleans()) else ""
    if grouped:
        keys = draw(st.lists(st.sampled_from(scope), min_size=1, max_size=2, unique=True))
        items = [c.text(draw) for c in keys]
        group = ", ".join(c.text(draw) for c in keys)
        for _ in range(draw(st.integers(1, 2))):
            fn = draw(st.sampled_from(["count(*)", "count", "sum", "min", "max", "avg"]))
            if fn == "count(*)":
                items.append(fn)
            else:
                kind = "INT" if fn in ("sum", "avg") else draw(st.sampled_from(["INT", "TEXT"]))
                items.append(f"{fn}({gen.expr(kind, 1)})")
        having = ""
        if draw(st.booleans()):
            having = f" HAVING count(*) {gen.pick('>', '>=', '=')} {draw(st.integers(0, 2))}"
        body = f"SELECT {', '.join(items)} FROM {source}{where} GROUP BY {group}{having}"
    else:
        kinds = kinds or [
            draw(st.sampled_from(["INT", "TEXT", "BOOL", "DOUBLE"]))
            for _ in range(draw(st.integers(1, 3)))
        ]
        items = [gen.expr(k) for k in kinds]
        distinct = "DISTINCT " if draw(st.integers(0, 4)) == 0 else ""
        body = f"SELECT {distinct}{', '.join(items)} FROM {source}{where}"
    if width is not None or not draw(st.booleans()):
        return body, False
    order = ", ".join(
        f"{i} {gen.pick('ASC', 'DESC')}{gen.pick('', ' NULLS FIRST', ' NULLS LAST')}"
        for i in range(1, len(items) + 1)
    )
    tail = f" ORDER BY {order}"
    if draw(st.booleans()):
        tail += f" LIMIT {draw(st.integers(0, 4))}"
        if draw(st.booleans()):
            tail += f" OFFSET {draw(st.integers(0, 3))}"
    return body + tail, True


@st.composite
def query(draw: st.DrawFn) -> tuple[str, bool]:
    """A query and whether its answer's order is fixed."""
    if draw(st.integers(0, 5)) == 0:
        kinds = ["INT"] * draw(st.integers(1, 2))
        left, _ = draw(select_query(width=len(kinds), kinds=kinds))
        right, _ = draw(select_query(width=len(kinds), kinds=kinds))
        op = draw(
            st.sampled_from(
                ["UNION", "UNION ALL", "INTERSECT", "INTERSECT ALL", "EXCEPT", "EXCEPT ALL"]
            )
        )
        return f"{left} {op} {right}", False
    return draw(select_query())

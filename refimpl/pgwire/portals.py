"""A connection's prepared statements and portals, as the conversation keeps them.

A `Plan` is one statement of a client's text, read; a `Prepared` statement holds its plan
and what its runs learned (parameter types, columns, the shape its rows were sent in, the
engine's prepared run); a `Portal` is one run of it, bound to its parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from refimpl.engine.result import Column, Result, message_result
from refimpl.engine.statements.prepared_runs import PreparedRun
from refimpl.errors import NotAllowed, UnknownPortal, UnknownPreparedStatement
from refimpl.pgwire import messages as m
from refimpl.pgwire import types
from refimpl.pgwire.session_settings import SettingCommand
from refimpl.pgwire.sqltext import Piece
from refimpl.pgwire.tags import command_tag
from refimpl.pgwire.types import ParamDecoders, RowShape
from refimpl.sql import ast

# Statements that answer rows; those of them without side effects may be run to describe
# their columns before they are executed.
_QUERIES = frozenset(
    (
        "Select",
        "Values",
        "SetOperation",
        "WithQuery",
        "ShowTables",
        "ShowColumns",
        "ShowCreateTable",
        "ShowUsers",
        "ShowDatabases",
        "ShowGrants",
        "ShowTriggers",
        "ShowProcedures",
        "CreateToken",
        "Fetch",
    )
)
# A parameter's stand-in in a Describe's dry run, by the type it runs as (`run_type`).
_STAND_INS = {
    "INT": 0, "BIGINT": 0, "DOUBLE": 0.0, "BOOLEAN": False, "STRING": "", "SYMBOL": "",
    "TIMESTAMP": datetime(1970, 1, 1, tzinfo=UTC),
}  # fmt: skip
# An array parameter's stand-in is an empty array (`= ANY ('')` is an error, not no rows).
_STAND_INS.update({t: "{}" for t in types.ARRAY_TYPES})
# A prepared statement's CommandCompletes kept (an UPDATE's counts may be many).
_COMPLETIONS_KEPT = 64


@dataclass(frozen=True, slots=True)
class Plan:
    """One statement of a client's text, read: a session setting or an engine statement.

    A text with constants where a `?` means the same (`refimpl.sql.templates`) is read as
    its template, as over `/exec`: `statement` is then the one parse every such text shares,
    with `?`s for the constants (`templated`), which tells its kind and tag; describing its
    columns parses it as written.
    """

    piece: Piece
    setting: SettingCommand | None = None
    statement: ast.Statement | None = None
    templated: bool = False

    @property
    def kind(self) -> str:
        return type(self.statement).__name__

    @property
    def answers_rows(self) -> bool:
        """Whether it answers rows (a RowDescription, DataRows): a query, a SHOW, a
        statement with RETURNING."""
        if self.setting is not None:
            return self.setting.verb == "SHOW"
        return self.kind in _QUERIES or bool(getattr(self.statement, "returning", ()))


@dataclass(slots=True)
class Prepared:
    plan: Plan | None  # None: the empty query
    param_oids: tuple[int, ...]  # the client's OIDs, by $n - 1 (0: unspecified)
    hints: dict[int, str] = field(default_factory=dict)  # $n -> column type described
    inferred: bool = False  # hints holds the types the parameters' places give them
    columns: list[Column] | None = None  # known once described
    shape: RowShape | None = None  # how its last result was sent, kept for the next run
    result_type: tuple[tuple[str, int], ...] | None = None  # its first run's (name, OID)s
    run: PreparedRun | None = None  # a SELECT, INSERT, UPDATE or DELETE read once: its runs
    answers_rows: bool = False  # its plan's `answers_rows`, worked out once
    # The CommandComplete of a `run` that answers no rows (its DML's), and its bytes, by the
    # count it tells.
    completions: dict[int, tuple[m.CommandComplete, bytes]] = field(default_factory=dict)
    # A Bind's decoder of each parameter, by the Bind's format codes; emptied whenever the
    # parameters' types are inferred (`hints`).
    decoders: dict[tuple[int, ...], ParamDecoders] = field(default_factory=dict)
    # Made once from the two above for every Bind: how many values a Bind sends, those the
    # client named no type of ($n), and whether the engine takes them in $1, $2, ... order.
    count: int = field(init=False)
    untyped: tuple[int, ...] = field(init=False)
    in_order: bool = field(init=False)

    def __post_init__(self) -> None:
        numbers = self.plan.piece.params if self.plan is not None else ()
        oids = self.param_oids
        self.count = max(max(numbers, default=0), len(oids))
        self.untyped = tuple(
            n for n in range(1, self.count + 1) if n > len(oids) or not oids[n - 1]
        )
        self.in_order = tuple(numbers) == tuple(range(1, self.count + 1))

    def run_type(self, number: int) -> str:
        """The engine type `$number` runs as, for the stand-in of a Describe's dry run ("":
        not known). A float or numeric type the client named is DOUBLE whatever the place
        gives (`$1 * 2` with an int4 literal beside it): its value is read as a float, so
        the columns described are those of every run. Otherwise the place's type: a
        client's `text` or `varchar` may stand where a TIMESTAMP goes, and an integer's
        stand-in is 0 whichever integer the client named."""
        oids = self.param_oids
        named = types.ENGINE_TYPE_OF_OID.get(oids[number - 1]) if number <= len(oids) else None
        return "DOUBLE" if named == "DOUBLE" else self.hints.get(number, "")

    def stand_ins(self) -> tuple[object, ...]:
        """A value of each parameter's `run_type` in the engine's `?` order (None where
        none is known), for a Describe's dry run."""
        numbers = self.plan.piece.params if self.plan is not None else ()
        return tuple(_STAND_INS.get(self.run_type(n)) for n in numbers)

    def completion(self, result: Result) -> tuple[m.CommandComplete, bytes]:
        """The CommandComplete of a `run` that answered no rows, and its bytes: its
        statement is fixed, so its tag differs only by the count (`INSERT 0 1`), and each is
        made once."""
        done = self.completions.get(result.count)
        if done is None:
            assert self.plan is not None and self.plan.statement is not None
            if len(self.completions) >= _COMPLETIONS_KEPT:
                self.completions.clear()
            message = m.CommandComplete(command_tag(self.plan.statement, result))
            done = self.completions[result.count] = (message, message.encode())
        return done

    def row_shape(self, columns: list[Column], formats: list[int]) -> RowShape:
        """The RowShape of `columns` in `formats`: the one kept, when it is still that."""
        shape = self.shape
        if shape is None or not shape.fits(columns, formats):
            shape = self.shape = RowShape.of(columns, formats)
        return shape


@dataclass(slots=True)
class Portal:
    prepared: Prepared
    params: tuple[object, ...]  # in the engine's `?` order
    result_formats: tuple[int, ...]
    result: Result | None = None
    sent: int = 0


def check_result_type(prepared: Prepared, columns: list[Column]) -> None:
    """A prepared statement answers the columns (names and types) of its first Describe or
    run, as in PostgreSQL: a client may have read them once and decode every later run by them. A
    schema change that alters them (ALTER TABLE under `SELECT *`, say) refuses the run."""
    shape = prepared.shape
    if shape is not None and shape.columns is columns:
        return  # the same plan's own list: nothing changed
    found = result_type_of(columns)
    if prepared.result_type is None:
        prepared.result_type = found
    elif found != prepared.result_type:
        raise NotAllowed(
            "cached plan must not change result type: the statement's columns changed since"
            " it was prepared (a schema change); close it and prepare it again"
        )


def result_type_of(columns: list[Column]) -> tuple[tuple[str, int], ...]:
    """The columns as a client decodes them: each one's name and type OID."""
    return tuple((c.name, types.column_pg_type(c).oid) for c in columns)


def move_portal(portal: Portal, move: ast.Fetch, run: Callable[[Portal], Result]) -> Result:
    """`MOVE FORWARD n portal` of a protocol portal (asyncpg's `Cursor.forward`): its next
    n rows are skipped (`run` gives its result if it has not run yet); the count is those
    there were."""
    if move.direction != "FORWARD":
        raise NotAllowed("a protocol portal moves FORWARD only (it reads its rows once)")
    if portal.result is None:
        portal.result = run(portal)
    left = len(portal.result.rows) - portal.sent
    moved = left if move.count is None else max(0, min(move.count, left))
    portal.sent += moved
    return message_result("MOVE", f"{moved} row(s) moved", moved)


def prepared_named(prepared: dict[str, Prepared], name: str) -> Prepared:
    """The connection's prepared statement of `name`."""
    found = prepared.get(name)
    if found is None:
        raise UnknownPreparedStatement(f'prepared statement "{name}" does not exist')
    return found


def portal_named(portals: dict[str, Portal], name: str) -> Portal:
    """The connection's portal of `name`."""
    found = portals.get(name)
    if found is None:
        raise UnknownPortal(f'portal "{name}" does not exist')
    return found

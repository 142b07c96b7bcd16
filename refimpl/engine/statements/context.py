"""What a statement handler may use of whoever runs it: the narrow seam under `Session`.

Handlers (here, and the change features' table functions and live queries) take a
`StatementContext` rather than a session, so that they depend on this list and not on the
session, the instance behind it, or the access package: `Session` satisfies the Protocol,
and so may a test's stand-in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from refimpl.errors import InsideTransactionBlock, TransactionError

if TYPE_CHECKING:
    from refimpl.engine.query.compiled import Compiled, Scope
    from refimpl.engine.query.select import RowSource
    from refimpl.engine.query.session_functions import SessionFunctions, SessionOf
    from refimpl.engine.result import Result
    from refimpl.engine.rights import Principal, Right
    from refimpl.engine.statements.cursor_state import Cursors
    from refimpl.engine.statements.publication_store import PublicationStore
    from refimpl.engine.statements.replication_slots import SlotStore
    from refimpl.engine.storage.database import Database
    from refimpl.engine.storage.schema import TableSchema
    from refimpl.engine.storage.table import Ident, Row, Table
    from refimpl.engine.storage.transaction import Transaction
    from refimpl.engine.storage.values import TypedRows
    from refimpl.sql import ast

T = TypeVar("T")

# A scalar SQL function of the session (kdb_rev, say): compiles its call in a scope, and
# its evaluator reads the session it runs for from the third argument when it runs
# (`query.session_functions`).
ScalarFunction = Callable[["ast.FuncCall", "Scope", "SessionOf[StatementContext]"], "Compiled"]
# A table function usable in FROM (changes, say): the rows of its call in one SELECT.
TableFunction = Callable[
    ["StatementContext", "ast.FunctionSource", "ast.Select", Sequence[Any]], "RowSource"
]


class Catalog(Protocol):
    """The databases of an instance, as statements see them."""

    def has_database(self, name: str) -> bool: ...

    def database_names(self) -> list[str]: ...

    def database(self, name: str) -> Database: ...

    def create_database(self, name: str, if_not_exists: bool = False) -> bool: ...

    def drop_database(
        self, name: str, if_exists: bool = False, current: str | None = None
    ) -> bool: ...

    @property
    def slots(self) -> SlotStore:
        """The replication slots of the data folder."""

    @property
    def publications(self) -> PublicationStore:
        """The publications of the data folder's databases."""


class AccessRules(Protocol):
    """What statements use of the access control (`refimpl.engine.access.AccessControl`)."""

    def allowed(
        self, principal: Principal, database: str, right: Right, table: str | None = None
    ) -> bool: ...

    def may_replicate(self, principal: Principal) -> bool: ...

    def check(
        self, principal: Principal, database: str, right: Right, table: str | None = None
    ) -> None: ...

    def check_any(self, principal: Principal, database: str) -> None: ...

    def execute(
        self,
        statement: ast.Statement,
        principal: Principal,
        database: str,
        *,
        database_exists: Callable[[str], bool] | None = None,
    ) -> Result: ...

    def forget_table(self, database: str, table: str) -> None: ...

    @property
    def version(self) -> int:
        """Moved by every change of users, tokens or grants (`AccessControl.version`)."""

    def user_id(self, name: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class FunctionTables:
    """The SQL functions an instance offers its sessions.

    `scalar` are the scalar functions of the session (kdb_rev needs its database and rights),
    one table for every session: each call finds its session when it runs; `tables` are the
    table functions, the same for every session.
    """

    scalar: Mapping[str, ScalarFunction]
    tables: dict[str, TableFunction]


class StatementContext(Protocol):
    """Everything a statement handler may use: who asks, where, and the ways to act."""

    @property
    def database(self) -> Database: ...

    @property
    def principal(self) -> Principal: ...

    @property
    def transaction(self) -> Transaction | None: ...

    @property
    def access(self) -> AccessRules: ...

    @property
    def catalog(self) -> Catalog: ...

    def authorize(
        self, right: Right, table: str | None = None, database: str | None = None
    ) -> None: ...

    def can_read(self, table: str) -> bool: ...

    def require_admin_user(self, what: str) -> None: ...

    def write(self, run: Callable[[Transaction], T]) -> T: ...

    def insert_new_row(
        self, table: str, make: Callable[[Table, T], tuple[Ident, Row]], made_of: T
    ) -> bool:
        """A one-row INSERT committing on its own without a transaction (`Session.
        insert_new_row`): True once committed; False, nothing done, when it cannot go so."""

    def load_rows(self, table: str, rows: TypedRows) -> int | None:
        """New rows inserted as a bulk load committing on its own (`Database.load_rows`),
        acknowledged as the context's own commits are: the count, or None when they cannot
        load so (in a transaction, say; nothing changed)."""

    def begin(self) -> None: ...

    @property
    def implicit(self) -> bool:
        """Whether the open transaction is the implicit one of a text of several statements
        (`Session.begin_text`)."""

    def commit(self) -> None: ...

    def rollback(self) -> None: ...

    @property
    def cursors(self) -> Cursors: ...

    def savepoint(self, name: str) -> None: ...

    def release_savepoint(self, name: str) -> None: ...

    def rollback_to(self, name: str) -> None: ...

    def deadline(self) -> float: ...

    def transaction_time(self) -> int:
        """now()'s moment, microseconds since 1970: the transaction block's start, the same
        for each of its statements; outside a block, the statement's (`statement_time`)."""

    def statement_time(self) -> int:
        """statement_timestamp()'s moment: the running statement's, one for all of it."""

    def sql_functions(self) -> SessionFunctions:
        """The instance's scalar functions, each call run for this context."""

    def table_functions(self) -> dict[str, TableFunction]: ...


def visible_schema(context: StatementContext, name: str) -> TableSchema:
    """The schema of table `name` as the caller sees it: its open transaction's own (a table
    it created or altered) first, else the committed one; UnknownTable if neither has it."""
    txn = context.transaction
    if txn is not None and txn.has_table(name):
        return txn.table(name).schema
    return context.database.committed_table(name).schema


def outside_transaction(context: StatementContext, what: str) -> None:
    """Refuse a statement that cannot be undone (`what`) inside a transaction: a block's
    COMMIT comes first; a text's implicit one, it is sent alone (as PostgreSQL refuses
    CREATE DATABASE among other statements)."""
    if context.implicit:
        raise InsideTransactionBlock(
            f"{what} cannot run inside a transaction block: the statements of one query"
            " text are one transaction; send it in a query of its own"
        )
    if context.transaction is not None:
        raise TransactionError(f"{what} cannot run inside a transaction; COMMIT first")

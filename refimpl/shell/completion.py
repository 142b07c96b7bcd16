"""Tab completion: SQL keywords, the database's tables, and the columns of the tables a
statement names (of every table while it names none)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

KEYWORDS = (
    "ADD",
    "ALL",
    "ALTER",
    "AND",
    "AS",
    "ASC",
    "BEGIN",
    "BETWEEN",
    "BIGINT",
    "BOOLEAN",
    "BY",
    "CASE",
    "CAST",
    "CHECKPOINT",
    "COLUMN",
    "COLUMNS",
    "COMMIT",
    "COUNT",
    "CREATE",
    "DATABASE",
    "DELETE",
    "DESC",
    "DISTINCT",
    "DOUBLE",
    "DROP",
    "ELSE",
    "END",
    "EXISTS",
    "FALSE",
    "FOR",
    "FROM",
    "GRANT",
    "GRANTS",
    "GROUP",
    "HAVING",
    "IF",
    "IN",
    "INSERT",
    "INT",
    "INTO",
    "IS",
    "KEY",
    "LIKE",
    "LIMIT",
    "NOT",
    "NULL",
    "OFFSET",
    "ON",
    "OR",
    "ORDER",
    "PARTITION",
    "PRIMARY",
    "REVOKE",
    "ROLLBACK",
    "SELECT",
    "SET",
    "SHOW",
    "STRING",
    "SYMBOL",
    "TABLE",
    "TABLES",
    "THEN",
    "TIMESTAMP",
    "TO",
    "TOKEN",
    "TRUE",
    "TRUNCATE",
    "UPDATE",
    "USER",
    "USERS",
    "VALUES",
    "WHEN",
    "WHERE",
)
COMMANDS = (
    "\\d",
    "\\dt",
    "\\du",
    "\\l",
    "\\c",
    "\\i",
    "\\x",
    "\\timing",
    "\\format",
    "\\pset",
    "\\q",
    "\\?",
)
# After these words a table name comes.
_TABLE_CONTEXT = frozenset({"FROM", "JOIN", "INTO", "TABLE", "UPDATE", "\\D", "TRUNCATE"})
_WORD = re.compile(r"[A-Za-z_\\][A-Za-z0-9_]*")


class Catalog:
    """Table and column names, asked of the database once and again after a schema change."""

    def __init__(
        self, tables: Callable[[], Sequence[str]], columns: Callable[[str], Sequence[str]]
    ) -> None:
        self._ask_tables = tables
        self._ask_columns = columns
        self._tables: list[str] | None = None
        self._columns: dict[str, list[str]] = {}

    def forget(self) -> None:
        """A statement may have changed the schema: ask again when next needed."""
        self._tables = None
        self._columns = {}

    def tables(self) -> list[str]:
        if self._tables is None:
            self._tables = list(self._ask_tables())
        return self._tables

    def columns(self, table: str) -> list[str]:
        key = table.lower()
        if key not in self._columns:
            self._columns[key] = list(self._ask_columns(table))
        return self._columns[key]


class SqlCompleter(Completer):
    """Completes the word before the cursor; names keep their case, keywords are upper."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def get_completions(self, document: Document, event: CompleteEvent) -> Iterable[Completion]:
        word = document.get_word_before_cursor(pattern=re.compile(r"[A-Za-z0-9_\\]+"))
        before = document.text_before_cursor[: len(document.text_before_cursor) - len(word)]
        words = _WORD.findall(before)
        previous = words[-1].upper() if words else ""
        if word.startswith("\\"):
            candidates: list[str] = list(COMMANDS)
        elif previous in _TABLE_CONTEXT:
            candidates = self.catalog.tables()
        else:
            candidates = [*self._columns_for(document.text), *self.catalog.tables(), *KEYWORDS]
        lowered = word.lower()
        seen: set[str] = set()  # a column named like a keyword is offered once, as named
        for candidate in candidates:
            key = candidate.lower()
            if key.startswith(lowered) and key not in seen:
                seen.add(key)
                yield Completion(candidate, start_position=-len(word))

    def _columns_for(self, text: str) -> list[str]:
        tables = self.catalog.tables()
        named = {w.lower() for w in _WORD.findall(text)}
        chosen = [t for t in tables if t.lower() in named] or tables
        return [c for t in chosen for c in self.catalog.columns(t)]

"""The schemas of tables made by their CREATE statements in a throwaway database
(`table_schemas`): what the tests of a change's shapes and events build their rows on."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator

import refimpl
from refimpl.engine.storage.schema import TableSchema


@contextlib.contextmanager
def table_schemas(tables: dict[str, str]) -> Iterator[dict[str, TableSchema]]:
    """Each name of `tables` -> the schema its CREATE TABLE statement made, as the engine
    keeps it; the database is gone once the block ends."""
    with tempfile.TemporaryDirectory() as folder:
        conn = refimpl.connect(folder)
        try:
            for statement in tables.values():
                conn.execute(statement)
            database = conn.instance.database(conn.database)
            yield {name: database.tables[name].schema for name in tables}
        finally:
            conn.close()

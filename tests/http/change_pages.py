"""A table of more rows than one C-level step of the change encoders takes (CHUNK_ROWS), in
a fresh embedded database: what the tests of big change pages read."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import refimpl
from refimpl.engine.features.change_stream import CHUNK_ROWS
from refimpl.engine.storage.database import Database
from refimpl.engine.storage.schema import TableSchema

ROWS = 2 * CHUNK_ROWS + 7  # three steps: the CREATE and the rows


class BigTable(NamedTuple):
    database: Database
    schema: TableSchema
    names: tuple[str, ...]  # its columns, in order
    kinds: dict[str, str]  # each column's type


@contextmanager
def big_table(name: str) -> Iterator[BigTable]:
    """Table `name` (id INT PRIMARY KEY, at TIMESTAMP, s STRING), its ROWS rows inserted in
    one transaction (row i: i, i * 1,000,003 us, "row\\n<i>"); the database is closed after."""
    quoted = '"' + name.replace('"', '""') + '"'
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute(f"CREATE TABLE {quoted} (id INT PRIMARY KEY, at TIMESTAMP, s STRING)")
        conn.session().insert_rows(
            name, ["id", "at", "s"], [(i, i * 1_000_003, f"row\n{i}") for i in range(ROWS)]
        )
        database = conn.instance.database(conn.database)
        schema = database.tables[name].schema
        kinds = {c.name: c.type for c in schema.columns}
        yield BigTable(database, schema, schema.column_names, kinds)

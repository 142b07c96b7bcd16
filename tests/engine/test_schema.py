"""A table's schema and the CREATE TABLE statement it is copied from, field by field."""

from __future__ import annotations

from dataclasses import fields

from refimpl.engine.storage.schema import DEFINITION_FIELDS, TableSchema
from refimpl.sql import ast
from tests.parsed import statement as parsed


def test_the_schema_keeps_every_field_of_create_table_but_if_not_exists():
    # A field added to CREATE TABLE alone would be dropped silently by from_create.
    statement_fields = {f.name for f in fields(ast.CreateTable)} - {"if_not_exists"}
    assert set(DEFINITION_FIELDS) == statement_fields


def test_a_schema_makes_the_statement_it_was_made_from():
    statement = parsed(
        "CREATE TABLE IF NOT EXISTS trades (ts TIMESTAMP, sym SYMBOL, px DOUBLE)"
        " TIMESERIES(ts) PARTITION BY DAY DEDUP KEY (ts, sym)",
        ast.CreateTable,
    )
    schema = TableSchema.from_create(statement)
    assert schema.dedup_key == ("ts", "sym")
    assert schema.to_create() == ast.CreateTable(
        **{
            f.name: getattr(statement, f.name)
            for f in fields(statement)
            if f.name != "if_not_exists"
        }
    )

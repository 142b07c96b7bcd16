"""PostgreSQL's type names beyond this engine's own (part of `refimpl.sql.ast`, which
re-exports every name here): aliases of its column types, the casts read by a function,
and the types it lacks, each with what to write instead (their use answers 0A000)."""

from __future__ import annotations

# PostgreSQL's names of this engine's column types (`TYPE_ALIASES` takes them in).
PG_TYPE_ALIASES = {
    "CHARACTER": "STRING",
    "INT4": "INT",
    "INT2": "INT",
    "INT8": "BIGINT",
    "FLOAT8": "DOUBLE",
    "FLOAT4": "DOUBLE",
    "OID": "BIGINT",
    "REGPROC": "BIGINT",
    "REGNAMESPACE": "BIGINT",
    "REGROLE": "BIGINT",
}
# Types a CAST reads with the function of their name (a relation's name to its OID): no
# column has them.
FUNCTION_CASTS = frozenset({"REGCLASS", "REGTYPE", "UUID"})
# PostgreSQL's column types this engine does not have -> what to write instead.
UNSUPPORTED_TYPES = {
    "SERIAL": "declare the column INT and give each row its value",
    "BIGSERIAL": "declare the column BIGINT and give each row its value",
    "SMALLSERIAL": "declare the column INT and give each row its value",
    "SERIAL4": "declare the column INT and give each row its value",
    "SERIAL8": "declare the column BIGINT and give each row its value",
    "DATE": "use TIMESTAMP (midnight UTC of the day)",
    "TIME": "use TIMESTAMP, or STRING",
    "INTERVAL": "use BIGINT microseconds",
    "JSON": "use STRING",
    "JSONB": "use STRING",
    "BYTEA": "use STRING",
    "UUID": "use STRING (x::uuid checks and writes a UUID's text)",
    "MONEY": "use DOUBLE",
    "INET": "use STRING",
}

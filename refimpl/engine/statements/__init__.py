"""Statements: SELECT, INSERT, UPDATE, DELETE, schema, transaction and admin statements,
each run for a session.

May import: `query`, `storage`, `tracking`, the engine's leaf modules, `refimpl.sql` and
`refimpl.errors`. Must not import `features`, `access`, `session`, `instance` or any
protocol layer (a session is passed in, not imported).
"""

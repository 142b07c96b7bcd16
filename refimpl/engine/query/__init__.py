"""Queries: compiled expressions, scalar functions, aggregates, SELECT planning and running.

May import: `storage`, `tracking`, the engine's leaf modules, `refimpl.sql` and
`refimpl.errors`. Must not import `statements`, `features`, `access`, `session`, `instance`
or any protocol layer: a query reads tables and knows nothing of who asked or why.
"""

"""The change features: the change stream read from the log (`changes()`), live queries that
re-run only the buckets a commit touched, and `kdb_rev()`.

May import: `statements`, `query`, `storage`, `tracking`, the engine's leaf modules,
`refimpl.sql` and `refimpl.errors`. Must not import `access`, `session`, `instance`, `feeds`
or any protocol layer.
"""

"""Storage: what is kept and how it survives a crash.

Column values and their coercion, table schemas, rows in ordered tables, per-transaction
overlays, the encoding of log records, the segmented write-ahead log with group commit,
checkpoints, schema changes shared by statements and replay, and `Database` (locks, commit,
recovery, retention); `wal_repair` is the operator's view of a log (`refimpl check`). Every
change to a file goes through the `FileOps` seam of `refimpl.engine.files`.

May import: the engine's leaf modules (`options`, `result`, `admission`, `rights`, `files`,
`measures`, `progress`), `tracking`,
`refimpl.sql` and `refimpl.errors`. Must not import `query`, `statements`, `features`,
`access`, `session`, `instance` or any protocol layer: storage knows rows and records,
never how a statement or a reader uses them.
"""

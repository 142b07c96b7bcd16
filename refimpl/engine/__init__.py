"""The database engine: tables, the write-ahead log, SQL execution and the change features.

In layers, bottom to top; a layer imports only from those under it:

1. leaf modules here: `options`, `result`, `admission`, `rights`, `files`, `measures`,
   `progress` (they import nothing of the engine);
2. `tracking`: revisions, commit signals, wake-ups, result caches;
3. `storage`: values, schemas, tables, transactions, the log, checkpoints, recovery;
4. `query`: expressions, functions, aggregates, SELECT planning and execution;
5. `statements`: running each kind of statement for a session;
6. `features`: the change stream, live queries, `kdb_rev`;
7. here again, on top: `access` (users, tokens, rights), `session`, `instance`, `feeds`,
   `event_streams` (with `stream_rows` and `stream_tally`), `copying`, `notifications`,
   `replication` (logical replication's engine half) and `replication_positions`.

Every layer may import `refimpl.errors` and `refimpl.sql`. The engine never imports
`refimpl.http`, `refimpl.pgwire` or `refimpl.waiting`: protocols call the engine, never the
other way round. `tests/test_layout.py` checks these rules.
"""

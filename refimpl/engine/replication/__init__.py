"""Logical replication's engine half, with no socket in sight: `decoding` reads a
database's committed transactions from the log as a slot shows them, `wakeups` wakes the
walsenders at each durable commit, `functions` answers `pg_current_wal_lsn()`. Positions
are `refimpl.engine.replication_positions`; slots and publications, which the catalog
shows, are in `refimpl.engine.statements` (spec: replication).

May import the whole engine (it stands beside `feeds` and `event_streams`), `refimpl.sql` and
`refimpl.errors`; never a protocol layer.
"""

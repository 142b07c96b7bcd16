"""Logical replication's engine half: positions, slots and a database's transactions as
the replication protocol sends them, with no socket in sight.

`positions` maps a change's (LSN, place in its transaction) to PostgreSQL's 64-bit LSN and
back (spec: replication); `slots` keeps replication slots durable beside the users file;
`decoding` reads a database's committed transactions from the log for a slot.

May import the whole engine (it stands beside `feeds` and `event_streams`), `refimpl.sql` and
`refimpl.errors`; never a protocol layer.
"""

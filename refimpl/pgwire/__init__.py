"""The PostgreSQL protocol (version 3.0): psql, psycopg, asyncpg and other drivers.

Written as h11 writes HTTP: `core` is a protocol core that knows no sockets (bytes in ->
events, our answers -> bytes), with its connection states as data in `states`, the message
formats in `messages`, type OIDs and value encodings in `types`; `conversation` answers the
events by calling the engine (statements, portals, transaction status, session settings);
`serving` is the socket loop apart. `sqlstate` is the one map of refimpl's errors to
SQLSTATE codes.

May import the engine (mostly through `instance`, `session`, `result` and `rights`; the
catalog's statements, value types and encodings, `notifications` and `replication` where
it serves them), `refimpl.sql`, `refimpl.netlimits`, `refimpl.netpool` (its workers run
over the same epoll set as HTTP's), `refimpl.waiting` (its acknowledgements wait for the
disk in `rounds`, as HTTP's writes do) and `refimpl.errors`; never `refimpl.http` (the two
protocols stand side by side), and nothing imports it but the command line.
"""

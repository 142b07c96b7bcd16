"""A sqllogictest runner: the SQLite project's test scripts run against a server's `/exec`.

It speaks only HTTP, like the conformance suite, so it imports nothing of the engine, the SQL
package or the HTTP layer: `records` reads the script format, `answers` formats, sorts and
hashes result values as sqllogictest does, `runner` runs a file against a server, `cli` is the
`refimpl sqllogictest` command.
"""

"""The HTTP protocol layer: the WSGI app, the route table, the route context, request input,
answer encoding, the one error-to-status map, authentication, CSV import and line protocol.

Endpoints live in `endpoints` (one module a job), the HTTP/1.1 server in `serving`. May
import the engine (best through `instance`, `session`, `access`, `feeds` and
`event_streams`; value and result types from where they are defined), `refimpl.waiting`,
`refimpl.netpool`, `refimpl.netlimits`, `refimpl.sql` and `refimpl.errors`; never
`refimpl.pgwire` (the two protocols stand side by side). Nothing under `refimpl.engine` or
`refimpl.waiting` may import this package.
"""

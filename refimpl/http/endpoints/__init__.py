"""The HTTP endpoints, one module a job: /exec and /exp, /imp and /write, /api/changes,
/api/subscribe, /api/rev, the service routes, and the console page at /.

Each takes the route `Context` and answers, or parks the request in the waiting room. May
import the rest of `refimpl.http` (not `app` or `routes`, which import these), the engine,
`refimpl.waiting`, `refimpl.sql` and `refimpl.errors`.
"""

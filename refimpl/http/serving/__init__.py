"""Serving: HTTP/1.1 on sockets, apart from the app (as Werkzeug keeps routing and serving
apart).

`wire` reads requests and writes answer bytes on one connection; `server` runs the workers
over one epoll set and sends the answers of parked requests; `limits` counts connections
and refuses those past the limits; `log_queue` writes the log lines off the requests'
threads while `run` serves. May import `refimpl.waiting`, `refimpl.netpool` (the workers
over one epoll set), `refimpl.netlimits`, `refimpl.http.encode`, `refimpl.http.request_log`,
`refimpl.http.error_answers` (the status of an error it answers itself), the engine's
`admission` and `refimpl.errors`; must not import the app, its routes or endpoints, which
reach the server only as a WSGI callable.
"""

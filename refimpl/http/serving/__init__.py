"""Serving: HTTP/1.1 on sockets, apart from the app (as Werkzeug keeps routing and serving
apart).

`wire` reads requests and writes answer bytes on one connection; `server` runs the workers
over one epoll set and sends the answers of parked requests; `limits` counts connections
and refuses those past the limits; `log_queue` writes the log lines off the requests'
threads while `run` serves. May import `refimpl.waiting`,
`refimpl.http.encode`, `refimpl.http.error_answers` (the status of an error it answers
itself) and the engine's `admission`; must not import the app, its routes or endpoints,
which reach the server only as a WSGI callable.
"""

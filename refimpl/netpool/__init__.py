"""The one mechanism both servers' connections run on, whatever protocol they speak.

`polling` runs a server's worker threads over one epoll set: the worker the kernel wakes
answers the connection itself (no dispatcher thread, no queue between threads), and only
the few workers that hold an admission place (`places`) wait on the set. The HTTP server
(`refimpl.http.serving.server`) and the PostgreSQL protocol's (`refimpl.pgwire.serving`)
each run one; what a connection's event means is theirs.

May import `refimpl.engine.admission` (the seam through which the engine tells a thread's
place to go on) and nothing else of refimpl.
"""

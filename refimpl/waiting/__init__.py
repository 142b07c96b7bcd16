"""Answers decided later: parked requests, the waiting room, the flusher and write
acknowledgements at the flush.

A request that cannot be answered now is parked here and its connection goes back to the
server; the room answers it when a commit, a wake-up or its deadline comes. Answers are
opaque objects of the protocol layer, and a commit signal is anything with the `Signal`
protocol of `parked`, so this package needs nothing of the engine. May import
`refimpl.errors`; must not import `refimpl.http` or any protocol layer, so that HTTP and the
PostgreSQL protocol can share it. The engine must not import it.
"""

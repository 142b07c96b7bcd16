"""Answers decided later: parked requests, the waiting room, the flusher and write
acknowledgements at the flush (over HTTP and, through `rounds`, the PostgreSQL protocol).

A request that cannot be answered now is parked here and its connection goes back to the
server; the room answers it when a commit, a wake-up or its deadline comes. A waiter is a
handle (`parked.Parked`, hashed by identity) that carries its own kind (a write's
acknowledgement, a change-stream reader, a live query's long poll, an event stream) and
state, moved only as the transition table of its kind allows (`parked.TRANSITIONS`). Answers are
opaque objects of the protocol layer, and a commit signal is anything with the `Signal`
protocol of `parked`, so this package needs nothing of the engine. May import
`refimpl.errors`; must not import `refimpl.http` or any protocol layer, so that HTTP and the
PostgreSQL protocol can share it. The engine must not import it.

The rule of waiters' own work: a waiter's own work (its filter, its ordered-window query,
its initial-copy page, its encoding) runs on that waiter's budget, under the statement
timeout and the per-user limits, never on a thread that other users' waiters depend on.
On the request's own thread while the request is being read (the protocol layer sets the
budget); once parked, on the `owners.OwnerPool` of the room, at most `PER_OWNER` pieces of
one user's work at once, each within the budget its protocol layer gives (`Offloaded`); a
user with nothing running gets a thread at once, whatever others keep queued.
The room's thread itself only hands over answers, encodes what every waiter shares and
takes plain streams' events, whose cost no client chooses.

The rule of users' shares: one user's work must not take more than its share of the
interpreter while another user's waits. Every client's own long work runs in steps and
takes turns between them, handed on one user at a time (each user waiting gets a turn
before any has a second): a waiter's filter, re-run or initial-copy page between its rows
(`refimpl.engine.query.deadlines.make_way`), a protocol session's pipelined messages and a
COPY's batches of rows between them (`deadlines.Steps`). Its first turn runs at once, so a
single query or a short COPY never waits; past it, the work runs only while it holds the
one turn (`deadlines.BULK`). The threads answering everyone else (this package's room and
flusher, the servers' workers) never take turns, and compete for the interpreter with one
client's long work at a time, not with every user's. The turns are the engine's, whose own
loops take them; the owner pool decides which users' pieces have a thread, the turns which
of the running ones has the interpreter.

The rule of the event streams' fan-out: a commit costs the streams nothing by itself (the
thread that publishes it pokes one list); their events go out in rounds. A round sends a
stream at most one part, holding every event since its last one, and streams of one view
at one place share that part: taken and encoded once, framed once, one send() a socket.
Rounds are paced by what waits, not by how busy the server looks (`fanout.FanoutPace`):
each database log with streams counts the commits that found another still waiting for
its flush (`queued_appends`). A round at whose end that count has not moved since the
round before goes on to the next at once, so commits that do not crowd each other go out
as soon as they are durable, at any rate and under any load of the machine. When it
moved, writers queue: the next round waits until the rest of the process has used
FANOUT_SPACING times the round's CPU time (that long by the clock, longer only while the
rest keeps BUSY_SHARE of a core busy; at most MAX_FANOUT_WAIT), so that while writers
queue the fan-out takes about 1/(FANOUT_SPACING + 1) of the processor time and each round
carries many commits.
"""

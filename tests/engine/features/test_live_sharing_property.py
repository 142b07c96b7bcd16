"""Sharing among subscribers changes no subscriber's answers (spec: subscribe, what wakes a
waiting request): with any mix of identical and different subscriptions of several users,
any sequence of commits, revokes, grants, re-polls and woken waits (long polls, and streams
whose wait goes on; the woken waits of all of them as one pass), every subscriber gets from
one shared manager what it gets from a manager of its own, where nothing is shared with
anyone."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait, Reply, SubscriptionManager
from refimpl.errors import KdbError
from tests.engine.features.candles import CANDLES_OF, TRADES
from tests.hypothesis_settings import OVER_FIXTURE

QUERIES = [
    CANDLES_OF.format(symbol="NABIL"),
    CANDLES_OF.format(symbol="NABIL").replace(" FROM ", "  from  "),  # the same, written otherwise
    CANDLES_OF.format(symbol="NEPSE"),
    "SUBSCRIBE SELECT symbol, count(*) AS n, max(price) AS hi FROM trades GROUP BY symbol",
    "SUBSCRIBE SELECT time, price FROM trades WHERE symbol = 'NABIL'",
]
USERS = ["admin", "alice", "bob"]
SYMBOLS = ["NABIL", "NEPSE"]

subscribers = st.lists(
    st.tuples(st.sampled_from(USERS), st.integers(0, len(QUERIES) - 1), st.booleans()),
    min_size=2,
    max_size=7,
)
operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("trade"), st.sampled_from(SYMBOLS), st.integers(0, 3), st.integers(90, 110)
        ),
        st.tuples(st.just("delete"), st.sampled_from(SYMBOLS)),
        st.tuples(st.just("ask"), st.integers(0, 6)),
        st.tuples(st.just("attempt"), st.integers(0, 6)),
        st.tuples(st.just("attempt"), st.integers(0, 2)),
        st.tuples(st.just("ask all")),
        st.tuples(st.just("ask all")),
        st.tuples(st.just("attempt all")),
        st.tuples(st.just("attempt all")),
        st.tuples(
            st.just("trade"), st.sampled_from(SYMBOLS), st.integers(0, 3), st.integers(90, 110)
        ),
        st.tuples(st.just("revoke"), st.sampled_from(USERS[1:])),
        st.tuples(st.just("grant"), st.sampled_from(USERS[1:])),
    ),
    max_size=40,
)


def _contents(reply: Reply) -> tuple:
    return (
        reply.kind,
        int(reply.id.rpartition(".")[2]),
        sorted(map(repr, reply.rows)),
        sorted(map(repr, reply.removed_keys)),
    )


class _Client:
    """A client of one subscription, as the routes serve it: a long poll asks, waits and
    is answered once; a stream's wait goes on after each answer (`attempt(keep=True)`,
    `follow`). `seen` is everything it was answered, errors included."""

    def __init__(self, manager: SubscriptionManager, session, text: str, stream: bool) -> None:
        self.manager, self.session, self.text, self.stream = manager, session, text, stream
        self.last: str | None = None
        self.wait: LiveWait | None = None
        self.seen: list[tuple] = []

    def ask(self) -> None:
        if self.wait is not None and self.stream:
            return  # a stream asks once; then its waits answer
        try:
            step = self.manager.ask(self.session, self.text, self.last)
        except KdbError as error:
            self.seen.append((type(error).__name__, str(error)))
            return
        if self.wait is not None:  # the newer request took over: the older ends
            self.attempt()
        self._take(step)

    def _take(self, step: Reply | LiveWait) -> None:
        while isinstance(step, Reply):
            self.seen.append(_contents(step))
            self.last = step.id
            if not self.stream:
                return
            step = self.manager.follow(self.session, step)
        self.wait = step
        step.watch(threading.Event())

    def attempt(self, reads: PassReads | None = None) -> None:
        wait = self.wait
        if wait is None:
            return
        try:
            reply = wait.attempt(keep=self.stream, reads=reads)
        except KdbError as error:
            wait.expire()
            self.wait = None
            self.seen.append((type(error).__name__, str(error)))
            return
        if reply is None:
            return
        self.seen.append(_contents(reply))
        if reply.kind == "none" or not self.stream:
            self.wait = None
            self.last = reply.id
            return
        self.last = reply.id
        step = self.manager.follow(self.session, reply, checked=True, wait=wait)
        if step is not wait:
            self.wait = None
            if isinstance(step, Reply):
                self.seen.append(_contents(step))
                self.last = step.id
                step = self.manager.follow(self.session, step)
            self._take(step)


@settings(OVER_FIXTURE, max_examples=80)
@given(subscribed=subscribers, steps=operations)
def test_every_subscriber_sees_what_it_sees_alone(tmp_path_factory, subscribed, steps):
    conn = refimpl.connect(tmp_path_factory.mktemp("sharing") / "data")
    try:
        conn.execute(TRADES)
        conn.execute(
            "INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 100),"
            " ('2026-09-24T10:00:20Z', 'NEPSE', 100)"
        )
        for user in USERS[1:]:
            conn.execute(f"CREATE USER {user}")
            conn.execute(f"GRANT SELECT ON trades TO {user}")
        shared = SubscriptionManager()

        def session(user: str):
            if user == "admin":
                return conn.session()
            return conn.instance.session("demo", Principal(user))

        pairs = [
            (
                _Client(shared, session(user), QUERIES[query], stream),
                _Client(SubscriptionManager(), session(user), QUERIES[query], stream),
            )
            for user, query, stream in subscribed
        ]

        def each(i: int | None, action: str) -> None:
            # The shared manager's woken waits of all the subscribers are one pass, which
            # reads the counters and the rights once (`PassReads`).
            with PassReads() as reads:
                for at, (together, alone) in enumerate(pairs):
                    if i is None or i == at:
                        if action == "attempt" and i is None:
                            together.attempt(reads)
                        else:
                            getattr(together, action)()
                        getattr(alone, action)()
                        assert together.seen == alone.seen, (at, subscribed[at])

        each(None, "ask")  # snapshots
        each(None, "ask")  # and waits
        for at, step in enumerate(steps):
            match step:
                case ("trade", symbol, minute, price):
                    conn.execute(
                        f"INSERT INTO trades VALUES ('2026-09-24T10:0{minute}:{at + 10}Z',"
                        f" '{symbol}', {price})"
                    )
                case ("delete", symbol):
                    conn.execute(
                        f"DELETE FROM trades WHERE symbol = '{symbol}' AND time <"
                        " '2026-09-24T10:01:00Z'"
                    )
                case ("ask", i) | ("attempt", i):
                    each(i, step[0])
                case ("ask all",) | ("attempt all",):
                    each(None, step[0].split()[0])
                case ("revoke", user):
                    conn.execute(f"REVOKE SELECT ON trades FROM {user}")
                case ("grant", user):
                    conn.execute(f"GRANT SELECT ON trades TO {user}")
        each(None, "attempt")
        each(None, "ask")
    finally:
        conn.close()

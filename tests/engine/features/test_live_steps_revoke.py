"""A REVOKE while a pass's streams take one step (`SubscriptionManager.take_steps`): a stream
checked after it is refused, as its own attempt would refuse it (spec: subscribe, rights
checked at every part), even when a stream of the same principal was let through just before
it. The access version a check is kept under must be read before the check: read after, a
REVOKE that lands between the two leaves the check kept under the REVOKE's own version."""

from __future__ import annotations

import threading
from typing import Any

import refimpl
from refimpl.engine.access import Principal
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.features.live_queries import LiveWait
from tests.engine.features.candles import CANDLES, TRADES


def test_a_revoke_during_the_call_stops_the_principals_next_stream(tmp_path: Any) -> None:
    with refimpl.connect(tmp_path / "data") as conn:
        conn.execute(TRADES)
        conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:10Z', 'NABIL', 1)")
        conn.execute("CREATE USER alice")
        conn.execute("GRANT SELECT ON trades TO alice")
        manager = conn.instance.subscriptions
        alice = Principal("alice")  # one token's streams: one principal object
        sessions = [conn.session()] + [conn.instance.session("demo", alice) for _ in range(2)]
        waits = []
        for session in sessions:
            step = manager.follow(session, manager.ask_now(session, CANDLES, None))
            assert isinstance(step, LiveWait)
            step.watch(threading.Event())
            waits.append(step)
        conn.execute("INSERT INTO trades VALUES ('2026-09-24T10:00:40Z', 'NABIL', 40)")
        reads = PassReads()
        assert waits[0].attempt(True, None, reads) is not None  # the admin's: the step

        checked = sessions[1]
        authorize = checked.authorize

        def then_revoke(*args: Any) -> None:
            authorize(*args)  # alice may read, as of now; the REVOKE comes right after
            checked.authorize = authorize  # type: ignore[method-assign]
            conn.execute("REVOKE SELECT ON trades FROM alice")

        checked.authorize = then_revoke  # type: ignore[method-assign, assignment]
        _, versions = manager.take_steps(waits[1:], reads)
        assert versions == [2], "a stream checked after the REVOKE was let through"
        assert waits[2].subscription.current.version == 1

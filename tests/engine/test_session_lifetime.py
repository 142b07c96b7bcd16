"""A session is freed when its last user lets it go (a request's session as the request
ends), not left to the collector: nothing of it makes a reference cycle, the deadline
source it keeps for its statements included."""

from __future__ import annotations

import gc
import weakref

from refimpl.engine.instance import Instance


def test_a_session_that_ran_statements_is_freed_without_the_collector(
    instance: Instance,
) -> None:
    collecting = gc.isenabled()
    gc.disable()  # only reference counts free what is let go below
    try:
        session = instance.session()
        session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v DOUBLE)")
        prepared = session.prepare("INSERT INTO t VALUES (?, ?)")
        assert prepared is not None
        session.run_prepared(prepared, (1, 0.5))
        session.execute("SELECT * FROM t WHERE v > 0")
        gone = weakref.ref(session)
        del session, prepared
        assert gone() is None
    finally:
        if collecting:
            gc.enable()

"""A long poll's connection keeps one engine session for its repeats (`subscribe_route`'s
`_session`) only while a new one would be the same: the same principal, in the database
that has the name now (one dropped and made again is another); a request that keeps
nothing has a session of its own."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from refimpl.engine.access import ADMIN
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.http.context import Context
from refimpl.http.endpoints.subscribe_route import _Asked, _Kept, _session, _waits
from refimpl.waiting.places import ADMIN_OWNER
from refimpl.waiting.room import WaitingRoom


@pytest.fixture
def instance(tmp_path: Path) -> Iterator[Instance]:
    opened = Instance.open(tmp_path / "data")
    try:
        opened.create_database("d")
        yield opened
    finally:
        opened.close()


def _ctx(instance: Instance, principal: Principal = ADMIN, database: str = "d") -> Context:
    app = SimpleNamespace(instance=instance)
    return Context(app, {}, {}, principal, database, "GET")


def _kept() -> _Kept:
    return _Kept(_Asked("SUBSCRIBE SELECT 1", 1000, False))


def test_repeats_share_a_session_while_it_is_what_a_new_one_would_be(
    instance: Instance,
) -> None:
    kept = _kept()
    first = _session(_ctx(instance), kept)
    assert first.database is instance.database("d") and first.principal is ADMIN
    assert _session(_ctx(instance), kept) is first
    first.close()  # each request's end: its session is as it was
    assert _session(_ctx(instance), kept) is first


def test_another_principal_or_database_has_a_new_session(instance: Instance) -> None:
    kept = _kept()
    first = _session(_ctx(instance), kept)
    other = Principal("someone")
    second = _session(_ctx(instance, other), kept)
    assert second is not first and second.principal is other
    instance.create_database("e")
    third = _session(_ctx(instance, other, "e"), kept)
    assert third is not second and third.database is instance.database("e")


def test_a_database_made_again_under_its_name_has_a_new_session(instance: Instance) -> None:
    kept = _kept()
    first = _session(_ctx(instance), kept)
    instance.drop_database("d")
    instance.create_database("d")
    again = _session(_ctx(instance), kept)
    assert again is not first and again.database is instance.database("d")


def test_a_request_that_keeps_nothing_has_its_own(instance: Instance) -> None:
    assert _session(_ctx(instance), None) is not _session(_ctx(instance), None)


def _waits_ctx(room: WaitingRoom, principal: Principal) -> Context:
    app = SimpleNamespace(waiting_room=room, wait_slots=threading.BoundedSemaphore(4))
    return Context(app, {}, {}, principal, "d", "GET")


def test_repeats_wait_where_their_principal_waited_and_another_principal_its_own(
    room: WaitingRoom,
) -> None:
    """Where a poll waits (its share's owner, the fair places, its user's batch of woken
    queries) is kept for its connection's repeats of the same principal; another principal
    on the connection waits in its own share and batch."""
    kept = _kept()
    admin_ctx = _waits_ctx(room, ADMIN)
    first = _waits(admin_ctx, kept)
    assert first.owner is ADMIN_OWNER and first.places is room.wait_places(admin_ctx.app.wait_slots)
    assert first.batch is room.owner_work.batches[ADMIN_OWNER]
    assert _waits(admin_ctx, kept) is first
    other = Principal("someone")
    second = _waits(_waits_ctx(room, other), kept)
    assert second.principal is other and second.owner == "someone"
    assert second.batch is room.owner_work.batches["someone"] and second.batch is not first.batch
    assert _waits(_waits_ctx(room, other), kept) is second
    assert _waits(admin_ctx, kept) is not second  # back to the admin: its own again
    assert _waits(admin_ctx, None).owner is ADMIN_OWNER  # keeps nothing, finds the same

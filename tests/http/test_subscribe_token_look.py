"""A live query stream's token look within a pass (`_TokenLook.gone_in`): the records are
looked at once a pass for each token and principal, whatever the number of its streams;
each pass looks again, and another token or principal is looked at on its own."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from refimpl.engine.event_streams import Credential
from refimpl.engine.features.live_pass import PassReads
from refimpl.engine.rights import Principal
from refimpl.errors import Unauthorized
from refimpl.http.endpoints.subscribe_stream import _TokenLook

U = Principal("u")


class _Records:
    """The access records' token look, counted; `dropped` tokens are refused."""

    def __init__(self) -> None:
        self.looks: list[str] = []
        self.dropped: set[str] = set()

    def principal_of_token_key(self, key: str) -> Principal:
        self.looks.append(key)
        if key in self.dropped:
            raise Unauthorized("the token is wrong, expired or revoked")
        return U


def _look(records: _Records, key: str, principal: Principal = U, checked: bool = True) -> Any:
    ctx = SimpleNamespace(request=SimpleNamespace(environ={}))  # no connection's check kept
    return _TokenLook(records, Credential(key, principal, checked), ctx)  # type: ignore[arg-type]


def test_the_streams_of_one_token_look_once_a_pass() -> None:
    records = _Records()
    streams = [_look(records, "a") for _ in range(5)]
    reads = PassReads()
    assert [s.gone_in(reads) for s in streams] == [None] * 5
    assert records.looks == ["a"]
    records.dropped.add("a")
    assert [s.gone_in(reads) for s in streams] == [None] * 5  # the pass's look stands
    later = PassReads()
    ended = [s.gone_in(later) for s in streams]
    assert all(e is not None and "revoked" in e for e in ended)
    assert records.looks == ["a", "a"]


def test_other_tokens_and_principals_are_looked_at_on_their_own() -> None:
    records = _Records()
    records.dropped.add("b")
    a, b = _look(records, "a"), _look(records, "b")
    other = _look(records, "a", Principal("v"))  # the token's user changed since
    reads = PassReads()
    assert a.gone_in(reads) is None
    assert b.gone_in(reads) is not None
    assert other.gone_in(reads) == "the token's user changed"
    assert a.gone_in(reads) is None
    assert sorted(records.looks) == ["a", "a", "b"]


def test_a_token_not_looked_at_again_stands() -> None:
    records = _Records()
    records.dropped.add("a")
    assert _look(records, "a", checked=False).gone_in(PassReads()) is None
    assert records.looks == []

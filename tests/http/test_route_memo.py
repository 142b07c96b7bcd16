"""A repeat's parameters from its route's note: those `query_args` reads from its query."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.errors import BadRequest
from refimpl.http import routes
from refimpl.http.request_input import query_args
from refimpl.http.route_memo import RouteMemo

SUBSCRIBE = next(r for r in routes.ROUTES if r.path == "/api/subscribe")

_PIECES = st.sampled_from(
    [
        "query=SELECT%201",
        "query=a+b",
        "wait=10",
        "db=x",
        "id=3fa1.7",
        "id=12",
        "id=",
        "id",
        "i%64=5",
        "%69d=3fa1.7",
        "id=3fa1%2E7",
        "id=%31",
        "x=%ff",
        "offsets=true",
    ]
)


def _args(query: str) -> dict[str, str] | None:
    try:
        return query_args({"QUERY_STRING": query}, SUBSCRIBE.repeatable)
    except BadRequest:
        return None


@settings(max_examples=400)
@given(st.lists(_PIECES, min_size=1, max_size=5, unique=True), st.integers(0, 10**20))
def test_a_noted_request_gives_its_repeats_the_parameters_query_args_reads(
    pieces: list[str], digits: int
) -> None:
    query = "&".join(pieces)
    args = _args(query)
    memo: RouteMemo[routes.Route] = RouteMemo()
    if args is not None:  # only a request whose head passed is noted
        memo.note(SUBSCRIBE, "GET", args, query)
    if memo.route is None:
        return
    # A repeat: the digits that end the id's value changed, nothing else (serving.repeats).
    start = memo.id_at
    end = len(query) - memo.id_tail
    value = query[start:end]
    kept = value.rstrip("0123456789")
    if kept == value:
        return  # no digits to change: never a repeat
    again = query[:start] + kept + str(digits) + query[end:]
    assert memo.args_of(again) == _args(again)
    assert memo.args_of(again)["id"] == kept + str(digits)


def test_what_is_not_noted() -> None:
    for query in ("id=%31", "i%64=1", "id=1&id=2", "wait=1", "id=1&%69d=2"):
        memo: RouteMemo[routes.Route] = RouteMemo()
        args = _args(query)
        if args is not None:
            memo.note(SUBSCRIBE, "GET", args, query)
        assert memo.route is None, query
    memo = RouteMemo()
    memo.note(SUBSCRIBE, "GET", {"id": "1"}, "wait=1&id=1")
    assert memo.route is SUBSCRIBE and memo.args_of("wait=1&id=2") == {"id": "2"}
    memo = RouteMemo()  # a route taking id several times reads the last: not noted
    memo.note(replace(SUBSCRIBE, repeatable=frozenset({"id"})), "GET", {"id": "1"}, "id=1")
    assert memo.route is None


def test_a_memo_of_repeats_with_the_same_target_notes_every_route_and_copies_its_args() -> None:
    # An /exec client's next statement (serving.repeats.BodyRepeat): the same target, so the
    # same parameters, whatever they are; each request gets a dict of its own.
    exec_route = next(r for r in routes.ROUTES if r.path == "/exec")
    for route, query in ((exec_route, ""), (exec_route, "db=x"), (SUBSCRIBE, "id=1&id=2")):
        args = {"db": "x"} if query == "db=x" else {}
        memo: RouteMemo[routes.Route] = RouteMemo(same_target=True)
        memo.note(route, "POST", args, query)
        assert memo.route is route and memo.method == "POST"
        given = memo.args_of(query)
        assert given == args and given is not args
        given["db"] = "changed"
        assert memo.args_of(query) == args

"""A request as dispatched, for its repeats: the same head but the digits of its `id=` value,
or the same head but its body's length (and another body).

A long poll's client asks again on its connection with the head it sent before but a new
id, an `/exec` client with the same head and its next statement (`serving.repeats`). Our
server gives such a repeat the environ of the request it repeats, with the new target (or
body), and the same `RouteMemo` (environ key `MEMO_KEY`), which the app filled in when it
dispatched that request (`App._dispatch`). What depends on the head alone gave the same
answer then, and is not asked again: the Host, the route, HEAD, the query's parameters (all
but `id`, which is read from the new query string; all of them for a repeat with another
body, whose target is the same) and the Origin. Who asks (a token or a session still good),
their rights in the database and whether it is there are checked at every request, repeat
or not, before the route runs.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

MEMO_KEY = "refimpl.route_memo"  # the environ key of a request's RouteMemo


class Routed(Protocol):
    """What a memo reads of a route (`refimpl.http.routes.Route`): a protocol, not an
    import, since routes import the endpoints, and an endpoint reads its memo."""

    @property
    def repeatable(self) -> frozenset[str]: ...


R = TypeVar("R", bound=Routed)


class RouteMemo(Generic[R]):
    """The route, method and parameters a request was dispatched to, and where its id's
    value is in its query string; `route` is None until `note`. `same_target`: its repeats
    come with its request target as it is (another body, `serving.repeats.BodyRepeat`)."""

    __slots__ = ("route", "method", "args", "id_at", "id_tail", "kept", "same_target")

    def __init__(self, same_target: bool = False) -> None:
        self.same_target = same_target
        self.route: R | None = None
        self.method = ""
        self.args: dict[str, str] = {}
        self.id_at = self.id_tail = 0
        # The route's own: what it made of `args` (all but `id`) at a request noted here,
        # kept for the repeats, whose other parameters are those (None: nothing kept).
        self.kept: object = None

    def note(self, route: R, method: str, args: dict[str, str], query: str) -> None:
        """Keep what the request of `query` was dispatched to, once every check of its head
        passed, when its `id` parameter is one piece of `query` (`id=` and the value as
        sent: a repeat changes digits in it, which need no decoding); for repeats of the same
        target, always."""
        if self.same_target:
            self.route, self.method, self.args = route, method, dict(args)
            return
        pieces = "&" + query
        found = pieces.find("&id=")
        if found < 0 or pieces.find("&id=", found + 1) >= 0 or "id" in route.repeatable:
            return
        start = found + 3  # the value's place in `query`
        end = query.find("&", start)
        if end < 0:
            end = len(query)
        if args.get("id") != query[start:end]:
            return
        # A copy: the first request's route may do as it likes with its own.
        self.route, self.method, self.args = route, method, dict(args)
        self.id_at, self.id_tail = start, len(query) - end

    def forget(self) -> None:
        """Let go of `kept`: what it holds that must end with the connection (a wait a long
        poll kept on the wake board for its re-poll) ends by its `let_go`, if it has one."""
        kept, self.kept = self.kept, None
        let_go = getattr(kept, "let_go", None)
        if let_go is not None:
            let_go()

    def args_of(self, query: str) -> dict[str, str]:
        """The parameters of a repeat, whose query string is `query`."""
        if self.same_target:
            return dict(self.args)  # a copy: each request's route may do as it likes
        return {**self.args, "id": query[self.id_at : len(query) - self.id_tail]}

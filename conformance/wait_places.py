"""The runner's budget of the server's wait places.

A server lets only so many requests wait at once (its wait places: spec/changes.md, how
long a request waits; refimpl has a quarter of its `--threads`, 4 by default). A waiting
request that finds every place taken is answered at once, as the spec allows, and an
example that expected it to wait (a `pending` step, a long poll answered at a commit)
fails. Examples run side by side would thus fail for each other's sake on a server with
few places. So the runner keeps a budget of places (`--wait-places`): an example counts
the places it may hold at once (`places_needed`, derived from its steps) from its start to
its end, and `run_within_budget` starts it only while the places of the examples running
leave room for it; the others keep running at `--jobs`.

What the runner counts as holding a place: a long poll of `/api/changes` (with `wait`
above 0, its default for `format=sse`, or `squash`), a long poll of `/api/subscribe` (an
`id` or `Last-Event-ID` and `wait` above 0, its default) and a live query's stream
(`/api/subscribe?stream=true`), from the request until its answer (a background request
until its `await`). Event streams (`/stream/changes`) hold none: they have their own
`stream_capacity`. A user other than the admin takes a place only while more are free than
it holds (the fair share); the admin user takes any free place. Anonymous callers count as
one user on the server, across examples too; no example of the spec waits without
credentials, and the budget does not count such waits across examples.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, TypeVar

from conformance.cases import Example

T = TypeVar("T")
R = TypeVar("R")

DEFAULT_WAIT_PLACES = 4  # a quarter of a default refimpl server's 16 threads
CHANGES_PATH = "/api/changes"
SUBSCRIBE_PATH = "/api/subscribe"
RAN_ALONE = (
    "ran alone: it may hold {needed} of the server's wait places at once,"
    " more than --wait-places {budget}"
)


def places_needed(example: Example) -> int:
    """How many wait places the example needs free at once to run as written.

    Each waiting request needs one place free besides those the example holds then (a
    background one keeps its place until its `await`); one of a user other than the admin
    needs one more for each place such users of the example hold (they are all counted as
    one user: which user a token is of, the runner does not know). SQL examples need none.
    """
    if example.kind != "http":
        return 0
    held_by_admin = held_by_others = needed = 0
    open_waits: dict[str, bool] = {}  # background name -> whether the admin holds it
    for step in example.data.get("steps", []):
        if "await" in step:
            admin = open_waits.pop(step["await"], None)
            if admin is not None:
                held_by_admin -= admin
                held_by_others -= not admin
            continue
        request = step.get("request")
        if not isinstance(request, dict) or not _waits(request):
            continue
        admin = request.get("auth", "admin") == "admin"
        share = 0 if admin else held_by_others  # the fair share of a user who holds some
        needed = max(needed, held_by_admin + held_by_others + 1 + share)
        if "background" in step:
            open_waits[step["background"]] = admin
            held_by_admin += admin
            held_by_others += not admin
    return needed


def _waits(request: Mapping[str, Any]) -> bool:
    """Whether a request may hold a wait place (see the module docstring). A value the
    runner cannot read (a `{{capture}}`) is taken to wait."""
    path = request.get("path")
    query = request.get("query") or {}
    if path == CHANGES_PATH:
        if "squash" in query:
            return True
        if "wait" in query:
            return _positive(query["wait"])
        return query.get("format", "sse") != "json"  # json's default wait is 0
    if path == SUBSCRIBE_PATH:
        if str(query.get("stream", "")).lower() in ("true", "1", "yes", "on"):
            return True
        headers = {str(name).lower() for name in request.get("headers") or {}}
        resumed = "id" in query or "last-event-id" in headers
        return resumed and _positive(query.get("wait", 1))
    return False


def _positive(value: Any) -> bool:
    """False only for a value that is surely 0 or less (such a `wait` waits for nothing,
    and a negative one is refused)."""
    try:
        return int(value) > 0
    except (TypeError, ValueError):
        return True


def run_within_budget(
    items: Iterable[T],
    jobs: int,
    budget: int,
    needs: Callable[[T], int],
    run: Callable[[T], R],
    done: Callable[[T, R], None],
) -> None:
    """Run `run(item)` for every item, at most `jobs` at once and never more than `budget`
    places held by those running (an item holds `needs(item)` from its start to its end);
    `done(item, result)` is called on this thread as each one ends.

    Items start in their order, each as soon as a job and its places are free. An item that
    finds too few places free waits, and no later item that holds places starts before it
    (items that hold none still do): so places free up until it fits, and no item waits for
    ever. An item that needs more than `budget` is a caller's error (`ValueError`): run it
    alone, with nothing else running. On an exception here (Ctrl-C) no item starts any more,
    and those running end before it goes on.
    """
    waiting = [(item, needs(item)) for item in items]
    most = max((need for _, need in waiting), default=0)
    if most > budget:
        raise ValueError(f"an item needs {most} places, more than the {budget} there are")
    jobs = max(1, jobs)
    running: dict[Future[R], tuple[T, int]] = {}
    held = 0
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        while waiting or running:
            left: list[tuple[T, int]] = []
            blocked = False  # an item holding places waits for them: none passes it by
            for item, need in waiting:
                if len(running) >= jobs or (need and (blocked or held + need > budget)):
                    blocked = blocked or need > 0
                    left.append((item, need))
                    continue
                held += need
                running[pool.submit(run, item)] = (item, need)
            waiting = left
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                item, need = running.pop(future)
                held -= need
                done(item, future.result())

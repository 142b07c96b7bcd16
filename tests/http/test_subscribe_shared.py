"""GET /api/subscribe on a real server: requests of one query woken by one commit all get
the same change (one run, one encoding), each under its own subscription's id; offsets."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

from tests.http.conftest import Server
from tests.http.stream_client import sse_events

QUERY = "SUBSCRIBE SELECT id, pts FROM scores ORDER BY pts DESC LIMIT 3"


def _subscribe(server: Server, db: str, ident: str | None = None, wait: int = 0):
    params = {"query": QUERY, "db": db, "offsets": "true", "wait": wait}
    if ident is not None:
        params["id"] = ident
    response = server.get("/api/subscribe", params=params, timeout=60)
    assert response.status_code == 200, response.text
    (event,) = sse_events(response.text)
    assert event[0] is not None
    return event[0], event[1], event[2]


def test_waiting_requests_of_one_query_get_one_change(server: Server, db: str):
    server.sql("CREATE TABLE scores (id INT PRIMARY KEY, pts INT)", db)
    server.sql("INSERT INTO scores VALUES (1, 50), (2, 40), (3, 30)", db)
    ids = [_subscribe(server, db)[0] for _ in range(6)]
    with ThreadPoolExecutor(len(ids)) as pool:
        waits = [pool.submit(_subscribe, server, db, ident, 20_000) for ident in ids]
        # A request still on its way when the commit lands is answered at once: the same.
        server.sql("INSERT INTO scores VALUES (4, 45)", db)
        answers = [w.result(timeout=60) for w in waits]
    # Only so many requests wait at once (a quarter of the threads); the others answered
    # at once with nothing, and asking again now gets the change too.
    answers = [
        _subscribe(server, db, ident) if kind is None else (ident, kind, data)
        for ident, kind, data in answers
    ]
    assert all(kind == "rows" for _, kind, _ in answers), [(i, k) for i, k, _ in answers]
    assert len({data for _, _, data in answers}) == 1
    assert sorted(ident.rpartition(".")[0] for ident, _, _ in answers) == sorted(
        ident.rpartition(".")[0] for ident in ids
    )
    change = json.loads(answers[0][2])
    assert change["moves"] == [
        {"old_offset": 2, "new_offset": None, "row": [3, 30]},
        {"old_offset": None, "new_offset": 1, "row": [4, 45]},
    ]


def test_offsets_on_a_query_without_order_is_a_400_that_changes_nothing(server: Server, db: str):
    server.sql("CREATE TABLE scores (id INT PRIMARY KEY, pts INT)", db)
    response = server.get(
        "/api/subscribe",
        params={"query": "SUBSCRIBE SELECT id FROM scores", "db": db, "offsets": "true"},
    )
    assert response.status_code == 400
    assert response.json()["error"].startswith("offsets=true needs an ordered, limited query")
    assert _subscribe(server, db)[1] == "snapshot"

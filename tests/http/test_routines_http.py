"""Triggers and CALL over HTTP on a real server: while a long CALL holds the database,
/api/rev and the change stream answer at once, from what was committed before it; its rows
appear, under one LSN, only once it commits."""

from __future__ import annotations

import threading
import time

import requests

from tests.http.conftest import Server

ROWS = 40_000


def test_rev_and_the_change_stream_answer_while_a_call_runs(server: Server, db: str) -> None:
    server.sql(
        "CREATE TABLE src (id INT PRIMARY KEY, v DOUBLE);"
        " CREATE TABLE a (id INT PRIMARY KEY, v DOUBLE)",
        db,
    )
    body = "".join(f"{i},{i / 3}\n" for i in range(ROWS)).encode()
    copied = server.post(
        "/exec",
        params={"db": db, "query": "COPY src FROM STDIN (FORMAT csv)"},
        data=body,
        headers={"Content-Type": "text/csv"},
        timeout=120,
    )
    assert copied.status_code == 200, copied.text
    # Three passes over the rows: a CALL of a few seconds on any machine.
    server.sql(
        "CREATE PROCEDURE slow() LANGUAGE SQL AS $$ INSERT INTO a SELECT * FROM src;"
        " UPDATE a SET v = v + 1; UPDATE a SET v = v * 2 $$",
        db,
    )
    before = server.get("/api/rev", params={"db": db, "table": "a"}).json()["table_rev"]
    position = server.get(
        "/api/changes", params={"db": db, "table": "a", "from": 0, "format": "json"}
    ).json()["next"]
    answers: list[requests.Response] = []
    caller = threading.Thread(target=lambda: answers.append(server.exec("CALL slow()", db)))
    caller.start()
    # Requests whose /api/rev still shows the old revision were answered before the CALL
    # committed, so while it held the database: they, and the page read before them, must
    # have been answered without waiting for it, and without its rows.
    during: list[float] = []
    while caller.is_alive():
        started = time.perf_counter()
        page = server.get(
            "/api/changes", params={"db": db, "table": "a", "from": position, "format": "json"}
        ).json()
        rev = server.get("/api/rev", params={"db": db, "table": "a"}).json()["table_rev"]
        if rev == before:
            during.append(time.perf_counter() - started)
            assert page["changes"] == []
        time.sleep(0.05)
    caller.join()
    assert answers[0].status_code == 200, answers[0].text
    assert len(during) >= 3, "the CALL ended before requests could be made while it ran"
    assert sorted(during)[len(during) // 2] < 1.0  # generous: a loaded machine
    after = server.get("/api/rev", params={"db": db, "table": "a"}).json()["table_rev"]
    assert after != before
    lsns = server.rows(
        "SELECT count(*), count(DISTINCT lsn) FROM changes('a', 0, 1000000) WHERE op = 'upsert'", db
    )
    assert lsns == [[ROWS, 1]]


def test_an_import_fires_triggers_in_its_commit(server: Server, db: str) -> None:
    server.sql(
        "CREATE TABLE t (id INT PRIMARY KEY, v INT); CREATE TABLE log (id INT);"
        " CREATE TRIGGER l AFTER INSERT ON t WHEN NEW.v > 1 BEGIN"
        " INSERT INTO log VALUES (NEW.id); END",
        db,
    )
    answer = server.post(
        "/imp",
        params={"db": db, "table": "t"},
        data=b"id,v\n1,1\n2,2\n3,3\n",
        headers={"Content-Type": "text/csv"},
    )
    assert answer.status_code == 200, answer.text
    assert server.rows("SELECT id FROM log ORDER BY id", db) == [[2], [3]]
    bad = server.post(
        "/imp",
        params={"db": db, "table": "t"},
        data=b"id,v\n4,4\n1,5\n",
        headers={"Content-Type": "text/csv"},
    )
    assert bad.status_code == 400
    assert server.rows("SELECT count(*) FROM log", db) == [[2]]

"""Changefeed options end to end on a real server (spec: changefeeds).

Before-images (`REPLICA IDENTITY FULL`) in `changes()` and `/api/changes` (JSON and SSE), a
table switched on and back with a reader across the switch, answers of other tables byte for
byte as before, and the options `types`, `states`, `squash` and `where` with their errors.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.http.conftest import Server
from tests.http.stream_client import open_stream


def _changes(server: Server, db: str, table: str, **params: Any) -> dict:
    answer = server.get(
        "/api/changes", params={"db": db, "table": table, "format": "json", **params}
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def _strip(changes: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "committed_at"} for c in changes]


def test_old_row_only_on_tables_with_before_images(server: Server, db: str) -> None:
    server.sql("CREATE TABLE plain (id INT PRIMARY KEY, v STRING)", db)
    server.sql("CREATE TABLE full (id INT PRIMARY KEY, v STRING) REPLICA IDENTITY FULL", db)
    for table in ("plain", "full"):
        server.sql(
            f"INSERT INTO {table} VALUES (1, 'a'); UPDATE {table} SET v = 'b'; DELETE FROM {table}",
            db,
        )
    plain = _changes(server, db, "plain")["changes"]
    assert all("old_row" not in c for c in plain)
    full = _strip(_changes(server, db, "full")["changes"])
    assert [(c["op"], c["row"], c["old_row"]) for c in full[1:]] == [
        ("upsert", {"id": 1, "v": "a"}, None),
        ("upsert", {"id": 1, "v": "b"}, {"id": 1, "v": "a"}),
        ("delete", None, {"id": 1, "v": "b"}),
    ]
    shown = server.rows("SHOW CREATE TABLE full", db)[0][1]
    assert shown.endswith(") REPLICA IDENTITY FULL")


def test_switch_on_and_back_with_a_reader_across(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 1)", db)
    before = _changes(server, db, "t")
    server.sql("ALTER TABLE t REPLICA IDENTITY FULL", db)
    server.sql("UPDATE t SET v = 2", db)
    middle = _changes(server, db, "t", **{"from": before["next"]})["changes"]
    assert [c["op"] for c in middle] == ["ddl", "upsert"]
    assert middle[0]["key"] == "ALTER TABLE t REPLICA IDENTITY FULL"
    assert middle[1]["old_row"] == {"id": 1, "v": 1}
    # The whole stream read now: the change logged before the switch has no before-image.
    whole = _changes(server, db, "t")["changes"]
    assert whole[1]["old_row"] is None
    server.sql("ALTER TABLE t REPLICA IDENTITY DEFAULT", db)
    server.sql("UPDATE t SET v = 3", db)
    after = _changes(server, db, "t")["changes"]
    assert all("old_row" not in c for c in after)
    assert after[-2]["key"] == "ALTER TABLE t REPLICA IDENTITY DEFAULT"
    old = server.rows("SELECT lsn, v FROM changes('t') WHERE op = 'upsert'", db)
    assert [row[1] for row in old] == [1, 2, 3]


def test_sse_events_carry_old_row_and_states(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("INSERT INTO t VALUES (1, 1); UPDATE t SET v = 2", db)
    answer = server.get(
        "/api/changes",
        params={"db": db, "table": "t", "states": "true", "types": "true", "wait": "0"},
    )
    assert answer.status_code == 200
    text = answer.text
    assert text.index('event: state\ndata: {"state":"ready","type":"state"}') < text.index(
        "event: change"
    )
    assert '"old_row":{"id":1,"v":1},"type":"change"' in text
    assert '"old_row":null,"type":"add"' in text


def test_types_and_states_in_json(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 1); DELETE FROM t", db)
    changes = _changes(server, db, "t", types="true", states="true")["changes"]
    assert changes[0] == {"state": "ready", "type": "state"}
    assert [c["type"] for c in changes[1:]] == ["ddl", "change", "remove"]
    resumed = _changes(server, db, "t", types="true", states="true", **{"from": 1})["changes"]
    assert [c.get("state") for c in resumed] == [None, None]
    empty = _changes(server, db, "t", states="true", **{"from": 3})
    assert empty["changes"] == []


def test_squash_merges_a_rows_changes(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("INSERT INTO t VALUES (1, 0), (2, 0)", db)
    for value in range(1, 6):
        server.sql(f"UPDATE t SET v = {value} WHERE id = 1", db)
    server.sql("INSERT INTO t VALUES (3, 0); DELETE FROM t WHERE id = 3", db)
    server.sql("INSERT INTO t VALUES (4, 0)", db)
    server.sql("DELETE FROM t WHERE id = 4", db)
    answer = _changes(server, db, "t", squash="true", **{"from": 1})
    rows = [(c["op"], c["row"], c["old_row"]) for c in answer["changes"]]
    assert rows == [
        ("upsert", {"id": 2, "v": 0}, None),
        ("upsert", {"id": 1, "v": 5}, None),
    ]
    plain = _changes(server, db, "t", **{"from": 1})
    assert answer["next"] == plain["next"]
    limited = _changes(server, db, "t", squash="true", limit=1, **{"from": 1})
    assert len(limited["changes"]) <= 2 and limited["more"] is True


def test_where_filters_and_point_feeds(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("INSERT INTO t VALUES (1, 5), (2, 50)", db)
    server.sql("UPDATE t SET v = 60 WHERE id = 1", db)  # enters v > 10
    server.sql("UPDATE t SET v = 1 WHERE id = 2", db)  # leaves it
    changes = _changes(server, db, "t", where="v > 10", types="true")["changes"]
    assert [(c["op"], c["type"], c["row"], c["old_row"]) for c in changes] == [
        ("ddl", "ddl", None, None),
        ("upsert", "add", {"id": 2, "v": 50}, None),
        ("upsert", "add", {"id": 1, "v": 60}, None),
        ("delete", "remove", None, {"id": 2, "v": 50}),
    ]
    point = _changes(server, db, "t", where="id = 1")["changes"]
    assert [c["row"] for c in point if c["op"] == "upsert"] == [
        {"id": 1, "v": 5},
        {"id": 1, "v": 60},
    ]


def test_bad_options_are_400_naming_them(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    cases = {
        "types": ("maybe", "'types'"),
        "states": ("2", "'states'"),
        "squash": ("soon", "'squash'"),
        "initial": ("perhaps", "'initial'"),
        "where": ("v >", "column"),
    }
    for name, (value, named) in cases.items():
        answer = server.get(
            "/api/changes", params={"db": db, "table": "t", "format": "json", name: value}
        )
        assert answer.status_code == 400, (name, answer.text)
        assert named in answer.json()["error"], answer.text
    unknown = server.get(
        "/api/changes", params={"db": db, "table": "t", "format": "json", "where": "nope = 1"}
    )
    assert unknown.status_code == 400 and "nope" in unknown.json()["error"]
    aggregate = server.get(
        "/api/changes", params={"db": db, "table": "t", "format": "json", "where": "count(*) > 1"}
    )
    assert aggregate.status_code == 400 and "aggregate" in aggregate.json()["error"]


def test_event_stream_gives_old_row_and_create_update(server: Server, db: str) -> None:
    server.sql("CREATE TABLE f (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("CREATE TABLE p (id INT PRIMARY KEY, v INT)", db)
    stream = open_stream(server, db)
    try:
        assert stream.take(1)[0]["event"] == "ready"
        server.sql("INSERT INTO f VALUES (1, 1); INSERT INTO p VALUES (1, 1)", db)
        server.sql("UPDATE f SET v = 2; UPDATE p SET v = 2", db)
        server.sql("DELETE FROM f; DELETE FROM p", db)
        data = [e["data"] for e in stream.take(6)]
    finally:
        stream.close()
    shown = [(d["table"], d["op"], d.get("old_row", "absent")) for d in data]
    assert shown == [
        ("f", "create", None),
        ("p", "upsert", "absent"),
        ("f", "update", {"id": 1, "v": 1}),
        ("p", "upsert", "absent"),
        ("f", "delete", {"id": 1, "v": 2}),
        ("p", "delete", "absent"),
    ]


def test_initial_copy_pages_resumes_and_goes_on(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3)", db)
    first = _changes(server, db, "t", initial="true", states="true", types="true", limit=2)
    assert first["changes"][0] == {"state": "initializing", "type": "state"}
    assert [c["row"] for c in first["changes"][1:]] == [{"id": 1, "v": 1}, {"id": 2, "v": 2}]
    assert first["more"] is True and isinstance(first["next"], str)
    server.sql("UPDATE t SET v = 10 WHERE id = 1", db)  # copied already: comes as a change
    server.sql("UPDATE t SET v = 30 WHERE id = 3", db)  # not yet copied: in the copy
    second = _changes(
        server,
        db,
        "t",
        initial="true",
        states="true",
        types="true",
        limit=2,
        **{"from": first["next"]},
    )
    shown = [(c.get("type"), c.get("row")) for c in second["changes"]]
    assert shown == [
        ("change", {"id": 1, "v": 10}),
        ("initial", {"id": 3, "v": 30}),
        ("state", None),
    ]
    assert second["next"] == 4 and second["more"] is False
    server.sql("DELETE FROM t WHERE id = 2", db)
    third = _changes(server, db, "t", initial="true", **{"from": second["next"]})
    assert [c["op"] for c in third["changes"]] == ["delete"]
    bad = server.get(
        "/api/changes",
        params={"db": db, "table": "t", "initial": "true", "from": "4:zz", "format": "json"},
    )
    assert bad.status_code == 400 and "from" in bad.json()["error"]
    server.sql("CREATE TABLE nokey (v INT)", db)
    refused = server.get(
        "/api/changes", params={"db": db, "table": "nokey", "format": "json", "initial": "true"}
    )
    assert refused.status_code == 400 and "PRIMARY KEY" in refused.json()["error"]


def test_squash_seconds_holds_a_resumed_answer(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("INSERT INTO t VALUES (1, 0)", db)
    started = time.monotonic()
    first = _changes(server, db, "t", squash="30")  # from the start: never held
    assert time.monotonic() - started < 20 and first["next"] == 2
    answers: list[dict] = []
    reader = threading.Thread(
        target=lambda: answers.append(_changes(server, db, "t", squash="2", **{"from": 2}))
    )
    reader.start()
    for value in range(1, 6):
        server.sql(f"UPDATE t SET v = {value}", db)
    reader.join(30)
    changes = answers[0]["changes"]
    assert changes[-1]["row"] == {"id": 1, "v": 5} and len(changes) <= 2

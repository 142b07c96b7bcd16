"""The changefeed options on `GET /stream/changes` on a real server (spec: changefeeds).

An initial copy in pages with ids inside it, resumed by `Last-Event-ID` without starting
again; states and types; a filtered feed whose rows enter and leave; squash within a part and
`squash=<seconds>` holding parts; the 400s of each option, before the stream opens.
"""

from __future__ import annotations

import time

from tests.http.conftest import Server
from tests.http.stream_client import open_stream


def _changes(events: list[dict]) -> list[tuple]:
    return [(e["data"]["op"], e["data"]["row"]) for e in events if e["event"] == "change"]


def test_initial_copy_then_changes_resumed_inside_the_copy(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    values = ", ".join(f"({n}, {n})" for n in range(1, 2001))
    server.sql(f"INSERT INTO t VALUES {values}", db)
    stream = open_stream(server, db, table="t", initial="true", states="true", types="true")
    assert stream.status == 200, stream.response.text
    first = stream.take(2)
    assert first[0] == {"event": "state", "data": {"state": "initializing", "type": "state"}}
    assert first[1]["event"] == "change" and first[1]["id"].startswith("2:")
    assert first[1]["data"] == {
        "table": "t",
        "op": "initial",
        "key": "92909101",
        "lsn": 2,
        "row": {"id": 1, "v": 1},
        "href": f"/stream/row?db={db}&table=t&key=92909101",
        "type": "initial",
    }
    seen = [first[1]]
    while len(seen) < 700:
        seen.append(stream.take(1)[0])
    stream.close()
    last = seen[-1]
    assert [e["data"]["row"]["id"] for e in seen] == list(range(1, 701))
    server.sql("UPDATE t SET v = -1 WHERE id = 5", db)  # a row the reader holds
    server.sql("UPDATE t SET v = -2 WHERE id = 1500", db)  # one still to come
    again = open_stream(
        server,
        db,
        table="t",
        initial="true",
        states="true",
        types="true",
        headers={"Last-Event-ID": last["id"]},
    )
    rest = []
    while True:
        event = again.next_event()
        assert event is not None
        if event["event"] == "ready":
            break
        rest.append(event)
    again.close()
    assert rest[0]["data"]["row"] == {"id": 5, "v": -1} and rest[0]["data"]["type"] == "change"
    initial = [
        e["data"]["row"] for e in rest if e["event"] == "change" and e["data"]["op"] == "initial"
    ]
    assert [r["id"] for r in initial] == list(range(701, 2001))
    assert initial[1500 - 701] == {"id": 1500, "v": -2}
    assert rest[-1] == {"event": "state", "data": {"state": "ready", "type": "state"}}
    assert rest[-2]["id"].isdigit()  # the last row's id is a plain LSN: the copy is over


def test_a_plain_id_never_starts_the_copy_again(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("INSERT INTO t VALUES (1)", db)
    stream = open_stream(server, db, table="t", initial="true")
    events = stream.take(2)
    stream.close()
    assert [e["event"] for e in events] == ["change", "ready"]
    assert events[0]["id"] == "2" and events[1]["id"] == "2"
    server.sql("INSERT INTO t VALUES (2)", db)
    again = open_stream(server, db, table="t", initial="true", headers={"Last-Event-ID": "2"})
    events = again.take(2)
    again.close()
    assert [(e["event"], e["id"], e["data"].get("op")) for e in events] == [
        ("change", "3.1", "upsert"),
        ("ready", "3", None),
    ]


def test_states_types_and_a_filter_on_a_table_with_before_images(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    stream = open_stream(server, db, table="t", where="v > 10", states="true", types="true")
    assert stream.take(2) == [
        {"event": "state", "data": {"state": "ready", "type": "state"}},
        {"retry": 1000, "event": "ready", "id": "1", "data": {}},
    ]
    server.sql("INSERT INTO t VALUES (1, 5), (2, 50)", db)
    server.sql("UPDATE t SET v = 60 WHERE id = 1", db)
    server.sql("UPDATE t SET v = 1 WHERE id = 2", db)
    events = stream.take(3)
    stream.close()
    assert [
        (e["id"], e["data"]["op"], e["data"]["type"], e["data"]["row"], e["data"]["old_row"])
        for e in events
    ] == [
        ("2.2", "create", "add", {"id": 2, "v": 50}, None),
        ("3.1", "create", "add", {"id": 1, "v": 60}, None),
        ("4.1", "delete", "remove", None, {"id": 2, "v": 50}),
    ]


def test_squash_merges_a_part_and_seconds_hold_the_next(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT) REPLICA IDENTITY FULL", db)
    server.sql("INSERT INTO t VALUES (1, 0)", db)
    for n in range(1, 6):
        server.sql(f"UPDATE t SET v = {n}", db)
    server.sql("INSERT INTO t VALUES (2, 0)", db)
    server.sql("DELETE FROM t WHERE id = 2", db)
    stream = open_stream(
        server, db, table="t", squash="true", types="true", headers={"Last-Event-ID": "2"}
    )
    events = stream.take(2)
    stream.close()
    assert [
        (e["id"], e["data"]["row"], e["data"]["old_row"], e["data"]["type"]) for e in events[:1]
    ] == [("7.1", {"id": 1, "v": 5}, {"id": 1, "v": 0}, "change")]
    assert events[1]["event"] == "ready"
    held = open_stream(server, db, table="t", squash="1", headers={"Last-Event-ID": "9"})
    assert held.take(1)[0]["event"] == "ready"
    server.sql("UPDATE t SET v = 10", db)
    first = held.take(1)[0]
    started = time.monotonic()
    for n in range(11, 21):
        server.sql(f"UPDATE t SET v = {n}", db)
    second = held.take(1)[0]
    waited = time.monotonic() - started
    held.close()
    assert first["data"]["row"] == {"id": 1, "v": 10}
    assert second["data"]["row"] == {"id": 1, "v": 20}, second
    assert second["data"]["old_row"] == {"id": 1, "v": 10}
    assert 0.3 < waited < 5


def test_bad_options_are_400s_before_the_stream_opens(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    server.sql("CREATE TABLE u (v INT)", db)
    cases = [
        ({"initial": "true"}, "'initial' needs exactly one table="),
        ({"where": "v > 1", "table": ["t", "u"]}, "'where' needs exactly one table="),
        ({"table": "t", "where": "v >"}, "where= does not parse: line 1, column"),
        ({"table": "t", "where": "nope = 1"}, "column 'nope' does not exist"),
        ({"table": "t", "types": "maybe"}, "the parameter 'types' must be true or false"),
        ({"table": "t", "squash": "0"}, "the parameter 'squash' must be true, false or"),
        ({"table": "u", "initial": "true"}, "needs a table with a PRIMARY KEY"),
        ({"table": "t", "initial": "true", "last-event-id": "2:zz"}, "names no place"),
    ]
    for params, message in cases:
        assert isinstance(params, dict)
        stream = open_stream(server, db, **params)
        assert stream.status == 400, (params, stream.response.text)
        assert message in stream.response.json()["error"], (params, stream.response.text)
        stream.close()


def test_a_copy_read_slowly_costs_bounded_memory_and_goes_on(server: Server, db: str) -> None:
    """A client that stops reading inside a copy of ~8 MB of rows: the server reads the copy
    on only as the client reads (bounded memory), then every row comes, once, in order."""
    rows, pad = 20_000, "p" * 400
    server.sql("CREATE TABLE big (id INT PRIMARY KEY, pad STRING)", db)
    for start in range(0, rows, 2000):
        values = ", ".join(f"({n}, '{pad}')" for n in range(start, start + 2000))
        server.sql(f"INSERT INTO big VALUES {values}", db)
    stream = open_stream(server, db, read_timeout=60, table="big", initial="true")
    assert stream.take(1)[0]["data"]["row"]["id"] == 0
    before = server.memory_kb() / 1024
    time.sleep(2)  # the server would read the whole copy now, were it not bounded
    grown = server.memory_kb() / 1024 - before
    assert grown < 5, f"the server grew by {grown:.1f} MB for a reader that stopped"
    seen = 1
    while True:
        event = stream.next_event()
        assert event is not None, "the stream ended"
        if event["event"] == "ready":
            break
        assert event["data"]["row"]["id"] == seen
        seen += 1
    stream.close()
    assert seen == rows

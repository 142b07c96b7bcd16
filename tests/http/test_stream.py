"""GET /stream/changes on a real server: events, ids, resume, rights, tickets and limits.

One server for the module, with a short heartbeat (`stream_heartbeat_s` in its kdb.conf);
each test makes its own database and users. What ends streams by time (max age, ticket
expiry, capacity) has a server of its own in test_stream_ends.py.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from tests.http.conftest import Server, running_server
from tests.http.stream_client import EventReader, open_stream

HEARTBEAT = 0.3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("stream") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text(f"stream_heartbeat_s = {HEARTBEAT}\n")
    with running_server(data) as running:
        yield running


@pytest.fixture
def db(server: Server) -> str:
    name = "s_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE DATABASE {name}")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", name)
    server.sql("CREATE TABLE u (id INT PRIMARY KEY, v DOUBLE)", name)
    return name


def user_token(server: Server, db: str, grant: str | None = "READ") -> tuple[str, str]:
    user = "u_" + uuid.uuid4().hex[:8]
    server.sql(f"CREATE USER {user}", db)
    if grant:
        server.sql(f"GRANT {grant} ON DATABASE {db} TO {user}", db)
    return user, server.new_token(user, db)


def kinds(events: list[dict]) -> list[tuple[str, str]]:
    return [(e["event"], e["id"]) for e in events]


def test_ready_then_every_change_with_ids_keys_and_hrefs(server: Server, db: str) -> None:
    stream = open_stream(server, db)
    assert stream.status == 200
    assert stream.response.headers["Content-Type"].startswith("text/event-stream")
    ready = stream.take(1)[0]
    assert ready == {"retry": 1000, "id": "2", "event": "ready", "data": {}}
    server.sql("BEGIN; INSERT INTO t VALUES (1, 'a'); INSERT INTO u VALUES (7, 1.5); COMMIT", db)
    server.sql("UPDATE t SET name = 'b' WHERE id = 1", db)
    first, second, update = stream.take(3)
    assert kinds([first, second, update]) == [
        ("change", "3.1"),
        ("change", "3.2"),
        ("change", "4.1"),
    ]
    assert first["data"] == {
        "table": "t", "op": "upsert", "key": "92909101", "lsn": 3, "row": {"id": 1, "name": "a"},
        "href": f"/stream/row?db={db}&table=t&key=92909101",
    }  # fmt: skip
    assert second["data"]["table"] == "u" and second["data"]["row"] == {"id": 7, "v": 1.5}
    assert update["data"]["row"] == {"id": 1, "name": "b"}
    row = server.get(update["data"]["href"])
    assert row.status_code == 200 and row.json() == {
        "table": "t", "key": "92909101", "row": {"id": 1, "name": "b"}
    }  # fmt: skip
    server.sql("DELETE FROM t WHERE id = 1", db)
    (delete,) = stream.take(1)
    assert delete["data"] == {
        "table": "t",
        "op": "delete",
        "key": "92909101",
        "lsn": 5,
        "row": None,
        "href": None,
    }
    gone = server.get(update["data"]["href"])
    assert gone.status_code == 404 and "gone" in gone.json()["error"]
    stream.close()


def test_named_tables_schema_changes_and_resets(server: Server, db: str) -> None:
    stream = open_stream(server, db, table=["t"])
    stream.take(1)
    server.sql("INSERT INTO u VALUES (1, 2.0)", db)
    server.sql("ALTER TABLE t ADD COLUMN extra INT", db)
    server.sql("INSERT INTO t VALUES (1, 'a', 5)", db)
    server.sql("TRUNCATE t", db)
    schema, insert, reset, ready = stream.take(4)
    assert schema["data"] == {
        "table": "t",
        "op": "schema",
        "key": None,
        "lsn": 4,
        "row": None,
        "href": None,
        "statement": "ALTER TABLE t ADD COLUMN extra INT",
    }
    assert insert["data"]["row"] == {"id": 1, "name": "a", "extra": 5}
    assert kinds([reset, ready]) == [("reset", "6"), ("ready", "6")]
    assert reset["data"] == {} and ready["data"] == {}
    stream.close()


def test_resume_by_header_and_by_parameter_exactly_once(server: Server, db: str) -> None:
    stream = open_stream(server, db)
    stream.take(1)
    server.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", db)
    server.sql("INSERT INTO t VALUES (4, 'd')", db)
    events = stream.take(4)
    stream.close()
    for cut in range(4):
        last = events[cut]["id"]
        again = open_stream(server, db, headers={"Last-Event-ID": last})
        assert kinds(again.take(3 - cut)) == kinds(events[cut + 1 :])
        assert again.take(1)[0]["event"] == "ready"
        again.close()
        by_param = open_stream(server, db, **{"last-event-id": last})
        assert kinds(by_param.take(3 - cut)) == kinds(events[cut + 1 :])
        by_param.close()
    quiet = open_stream(server, db, headers={"Last-Event-ID": events[-1]["id"]})
    assert kinds(quiet.take(1)) == [("ready", "4")]  # nothing missed, no reset
    quiet.close()


def test_bad_input_is_refused_before_the_stream_opens(server: Server, db: str) -> None:
    for params, status, words in [
        ({"last-event-id": "x1"}, 400, "event id"),
        ({"last-event-id": "3.0"}, 400, "out of range"),
        ({"lastid": "3"}, 400, "unknown query parameter"),
        ({"table": "nope"}, 404, "does not exist"),
    ]:
        answer = server.get("/stream/changes", params={"db": db, **params})
        assert answer.status_code == status, answer.text
        assert words in answer.json()["error"]
    anonymous = server.get("/stream/changes", params={"db": db}, token=None)
    assert anonymous.status_code == 401 and "token" in anonymous.json()["error"]
    user, reader = user_token(server, db, grant=None)
    server.sql(f"GRANT SELECT ON t TO {user}", db)
    refused = server.get("/stream/changes", params={"db": db, "table": "u"}, token=reader)
    assert refused.status_code == 403
    missing = server.get("/stream/changes", params={"db": "no_such_db"})
    assert missing.status_code == 404
    head = server.request("HEAD", "/stream/changes", params={"db": db})
    assert head.status_code == 405


def test_rights_gained_and_lost_while_open(server: Server, db: str) -> None:
    user, token = user_token(server, db, grant=None)
    server.sql(f"GRANT SELECT ON t TO {user}", db)
    stream = open_stream(server, db, token=token)
    stream.take(1)
    server.sql("INSERT INTO u VALUES (1, 1.0)", db)  # not readable: no event
    server.sql("INSERT INTO t VALUES (1, 'a')", db)
    assert stream.take(1)[0]["data"]["table"] == "t"
    server.sql(f"GRANT SELECT ON u TO {user}", db)
    server.sql("INSERT INTO u VALUES (2, 2.0)", db)
    assert stream.take(1)[0]["data"]["row"] == {"id": 2, "v": 2.0}
    server.sql(f"REVOKE SELECT ON u FROM {user}", db)
    server.sql("INSERT INTO u VALUES (3, 3.0)", db)
    server.sql("INSERT INTO t VALUES (2, 'b')", db)
    assert stream.take(1)[0]["data"]["table"] == "t"
    stream.close()


@pytest.mark.parametrize("how", ["revoke", "drop_token", "drop_user"])
def test_losing_the_right_or_the_token_ends_the_stream_within_a_second(
    server: Server, db: str, how: str
) -> None:
    user, token = user_token(server, db)
    stream = open_stream(server, db, token=token)
    stream.take(1)
    started = time.monotonic()
    if how == "revoke":
        server.sql(f"REVOKE READ ON DATABASE {db} FROM {user}", db)
    elif how == "drop_token":
        server.sql(f"DROP TOKEN '{token}'", db)
    else:
        server.sql(f"DROP USER {user}", db)
    assert stream.until_end(5) == []
    assert time.monotonic() - started < 1.5
    assert any("ended" in c for c in stream.comments)
    again = server.get("/stream/changes", params={"db": db}, token=token)
    assert again.status_code in (401, 403)


def test_heartbeats_with_a_short_setting(server: Server, db: str) -> None:
    stream = open_stream(server, db)
    stream.take(1)
    time.sleep(HEARTBEAT * 4)
    server.sql("INSERT INTO t VALUES (1, 'a')", db)
    stream.take(1)
    assert stream.comments.count("heartbeat") >= 2
    stream.close()


def test_tickets_work_once_and_only_in_their_database(server: Server, db: str) -> None:
    _, token = user_token(server, db)
    answer = server.post("/stream/tickets", params={"db": db}, token=token)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"ticket", "expires_at"} and body["expires_at"].endswith("Z")
    ticket = body["ticket"]
    stream = open_stream(server, db, token=None, ticket=ticket)
    assert stream.status == 200 and stream.take(1)[0]["event"] == "ready"
    stream.close()
    again = server.get("/stream/changes", params={"db": db, "ticket": ticket}, token=None)
    assert again.status_code == 401 and "once" in again.json()["error"]
    other = server.post("/stream/tickets", params={"db": db}, token=token).json()["ticket"]
    wrong_db = server.get("/stream/changes", params={"db": "demo", "ticket": other}, token=None)
    assert wrong_db.status_code == 401
    anonymous = server.post("/stream/tickets", params={"db": db}, token=None)
    assert anonymous.status_code == 401
    assert ticket not in server.log.read_text() and other not in server.log.read_text()


@pytest.mark.parametrize(
    "refusal",
    [
        {"headers": {"Last-Event-ID": "not-an-id"}},
        {"params": {"nope": "1"}},
        {"headers": {"Authorization": "Bearer {token}"}},
        {"params": {"initial": "maybe"}},
    ],
    ids=["bad-last-event-id", "unknown-parameter", "ticket-and-header", "bad-option"],
)
def test_a_ticket_named_by_a_refused_connect_is_used_up(
    server: Server, db: str, refusal: dict
) -> None:
    _, token = user_token(server, db)
    ticket = server.post("/stream/tickets", params={"db": db}, token=token).json()["ticket"]
    params = {"db": db, "ticket": ticket, **refusal.get("params", {})}
    headers = {k: v.format(token=token) for k, v in refusal.get("headers", {}).items()}
    refused = server.get("/stream/changes", params=params, headers=headers, token=None)
    assert refused.status_code == 400, refused.text
    later = server.get("/stream/changes", params={"db": db, "ticket": ticket}, token=None)
    assert later.status_code == 401 and "once" in later.json()["error"]


def test_limits_per_token_and_per_user_with_takeover(server: Server, db: str) -> None:
    user, token = user_token(server, db)
    streams: list[EventReader] = []
    for _ in range(3):
        stream = open_stream(server, db, token=token, wait_free=0)
        streams.append(stream)
        stream.take(1)
    fourth = server.get("/stream/changes", params={"db": db}, token=token)
    assert fourth.status_code == 429 and int(fourth.headers["Retry-After"]) > 0
    assert "streams_per_token" in fourth.json()["error"]
    # A ticket used for a refused connect is used up all the same.
    ticket = server.post("/stream/tickets", params={"db": db}, token=token).json()["ticket"]
    refused = server.get("/stream/changes", params={"db": db, "ticket": ticket}, token=None)
    assert refused.status_code == 429
    reused = server.get("/stream/changes", params={"db": db, "ticket": ticket}, token=None)
    assert reused.status_code == 401
    # A reconnect with a counted stream's last id takes that stream over.
    server.sql("INSERT INTO t VALUES (1, 'a')", db)
    last = [s.take(1)[0]["id"] for s in streams][0]
    takeover = open_stream(server, db, token=token, headers={"Last-Event-ID": last})
    assert takeover.status == 200 and takeover.take(1)[0]["event"] == "ready"
    assert streams[0].until_end(5) == []
    for stream in [*streams[1:], takeover]:
        stream.close()
    # Ten per user, whichever token: an eleventh is refused.
    tokens = [server.new_token(user, db) for _ in range(4)]
    held: list[EventReader] = []
    deadline = time.monotonic() + 5
    while len(held) < 10 and time.monotonic() < deadline:
        stream = open_stream(server, db, token=tokens[len(held) // 3], wait_free=0)
        if stream.status == 200:
            stream.take(1)
            held.append(stream)
        else:
            stream.close()
            time.sleep(0.1)  # closed streams are counted out when the server sees them go
    assert len(held) == 10
    eleventh = server.get("/stream/changes", params={"db": db}, token=tokens[3])
    assert eleventh.status_code == 429 and "streams_per_user" in eleventh.json()["error"]
    for stream in held:
        stream.close()


def test_streams_hold_no_worker_and_exec_answers(server: Server, db: str) -> None:
    streams = [open_stream(server, db) for _ in range(3)]
    for stream in streams:
        stream.take(1)
    for n in range(20):
        server.sql(f"INSERT INTO t VALUES ({n}, 'x')", db)
    for stream in streams:
        assert [e["id"] for e in stream.take(20)] == [f"{n}.1" for n in range(3, 23)]
        stream.close()

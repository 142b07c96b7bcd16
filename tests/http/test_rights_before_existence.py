"""Rights are checked before existence is revealed (spec: users-and-rights, "Rights before
existence"), route by route and statement by statement, on a real server.

For each request below, a caller without the right it needs asks once about a table (or
database) that exists and once about one that does not: the two answers must be the same
status and the same error, the name asked for aside. Three callers: anonymous (401), a user
with no right at all (403), and a user who may read one other table of the database, so is
past the database's door (403 for the table; for another database, 403 as well).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import Server, running_server

# (method, path, query, body): {name} is the table, or the database, asked about.
TABLE_REQUESTS: list[tuple[str, str, dict[str, str], bytes | None]] = [
    *(
        ("POST", "/exec", {}, sql.encode())
        for sql in (
            "SELECT * FROM {name}",
            "SELECT id FROM {name} WHERE id = 1",
            "SHOW COLUMNS FROM {name}",
            "SHOW CREATE TABLE {name}",
            "EXPLAIN SELECT * FROM {name}",
            "SELECT * FROM changes('{name}')",
            "SELECT kdb_rev('{name}')",
            "COPY {name} TO STDOUT",
            "WITH x AS (SELECT * FROM {name}) SELECT 1",
            "SELECT EXISTS (SELECT 1 FROM {name})",
            "SELECT * FROM shown JOIN {name} ON true",
            "INSERT INTO {name} VALUES (1)",
            "DELETE FROM {name}",
            "SELECT count(*) FROM pg_class WHERE relname = '{name}'",
            "SELECT count(*) FROM pg_attribute a JOIN pg_class c ON a.attrelid = c.oid"
            " WHERE c.relname = '{name}'",
        )
    ),
    ("GET", "/exp", {"query": "SELECT * FROM {name}"}, None),
    ("GET", "/api/changes", {"table": "{name}", "format": "json"}, None),
    ("GET", "/api/rev", {"table": "{name}"}, None),
    ("GET", "/api/subscribe", {"query": "SUBSCRIBE SELECT * FROM {name}", "wait": "0"}, None),
    ("GET", "/stream/changes", {"table": "{name}"}, None),
    ("GET", "/stream/row", {"table": "{name}", "key": "1"}, None),
    ("POST", "/stream/tickets", {"table": "{name}"}, None),
    ("POST", "/imp", {"table": "{name}"}, b"id\n1\n"),
    ("POST", "/write", {}, b"{name} v=1i\n"),
]
DATABASE_REQUESTS: list[tuple[str, str, dict[str, str], bytes | None]] = [
    ("POST", "/exec", {"db": "{name}"}, b"SELECT 1"),
    ("POST", "/exec", {"db": "{name}"}, b"SHOW TABLES"),
    ("POST", "/exec", {"db": "{name}"}, b"SELECT * FROM t"),
    ("POST", "/exec", {"db": "{name}"}, b"SHOW GRANTS FOR someone"),
    ("GET", "/exp", {"db": "{name}", "query": "SELECT * FROM t"}, None),
    ("GET", "/api/changes", {"db": "{name}", "table": "t", "format": "json"}, None),
    ("GET", "/api/rev", {"db": "{name}", "table": "t"}, None),
    ("GET", "/api/subscribe", {"db": "{name}", "query": "SUBSCRIBE SELECT * FROM t"}, None),
    ("GET", "/api/stats", {"db": "{name}"}, None),
    ("GET", "/stream/changes", {"db": "{name}"}, None),
    ("GET", "/stream/row", {"db": "{name}", "table": "t", "key": "1"}, None),
    ("POST", "/stream/tickets", {"db": "{name}"}, None),
    ("POST", "/imp", {"db": "{name}", "table": "t"}, b"id\n1\n"),
    ("POST", "/write", {"db": "{name}"}, b"t v=1i\n"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("before-existence") / "data"
    with running_server(data) as running:
        yield running


@pytest.fixture(scope="module")
def place(server: Server) -> dict[str, str]:
    """The database `db` with tables `hidden` (that nobody but the admin may read) and
    `shown`; a database `other` with a table `t`; the callers' tokens."""
    tag = uuid.uuid4().hex[:8]
    names = {"db": f"be_{tag}", "other": f"bo_{tag}", "hidden": f"hid_{tag}"}
    server.sql(f"CREATE DATABASE {names['db']}; CREATE DATABASE {names['other']}")
    server.sql(f"CREATE TABLE {names['hidden']} (id INT PRIMARY KEY)", names["db"])
    server.sql("CREATE TABLE shown (id INT PRIMARY KEY)", names["db"])
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", names["other"])
    for user in ("nobody", "shown"):
        server.sql(f"CREATE USER {user}_{tag}")
        names[user] = server.new_token(f"{user}_{tag}")
    server.sql(f"GRANT SELECT ON shown TO shown_{tag}", names["db"])
    return names


def _answer(
    server: Server,
    token: str | None,
    request: tuple[str, str, dict[str, str], bytes | None],
    name: str,
    db: str,
) -> tuple[int, str]:
    """Status and error of `request` about `name`, the name written as X."""
    method, path, query, body = request
    params = {"db": db, **{k: v.format(name=name) for k, v in query.items()}}
    data = body.replace(b"{name}", name.encode()) if body is not None else None
    answer = server.request(
        method, path, params=params, data=data, token=token, stream=True, timeout=(10, 10)
    )
    try:
        if answer.status_code == 200:
            shown = answer.text[:300] if path != "/stream/changes" else "an open stream"
            return 200, shown.replace(name, "X")
        error = answer.json().get("error", answer.text)
    except (requests.RequestException, ValueError):
        error = answer.text
    finally:
        answer.close()
    return answer.status_code, str(error).replace(name, "X")


@pytest.mark.parametrize("caller", ["anonymous", "nobody", "shown"])
def test_a_table_the_caller_may_not_read_answers_as_a_missing_one(
    server: Server, place: dict[str, str], caller: str
):
    token = None if caller == "anonymous" else place[caller]
    expected = 401 if caller == "anonymous" else 403
    missing = "mis_" + uuid.uuid4().hex[:8]
    found = {}
    for request in TABLE_REQUESTS:
        there = _answer(server, token, request, place["hidden"], place["db"])
        not_there = _answer(server, token, request, missing, place["db"])
        label = f"{request[0]} {request[1]} {request[2]} {request[3]!r}"
        if there != not_there:
            found[label] = (there, not_there)
        elif there[0] != expected and not (caller == "shown" and there[0] == 200):
            found[label] = (there, not_there)
    assert not found, found


@pytest.mark.parametrize("caller", ["anonymous", "nobody", "shown"])
def test_a_database_the_caller_holds_no_right_in_answers_as_a_missing_one(
    server: Server, place: dict[str, str], caller: str
):
    token = None if caller == "anonymous" else place[caller]
    expected = 401 if caller == "anonymous" else 403
    missing = "mis_" + uuid.uuid4().hex[:8]
    found = {}
    for request in DATABASE_REQUESTS:
        there = _answer(server, token, request, place["other"], place["other"])
        not_there = _answer(server, token, request, missing, missing)
        label = f"{request[0]} {request[1]} {request[2]} {request[3]!r}"
        if there != not_there or there[0] != expected:
            found[label] = (there, not_there)
    assert not found, found

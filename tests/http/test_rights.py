"""Each role against each route; table revokes; tokens across databases; anonymous; PUBLIC."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

from tests.http.conftest import Server


@pytest.fixture
def people(server: Server, db: str) -> dict[str, str | None]:
    """Tokens of a reader, a writer, a database admin, a user with no rights, and anonymous."""
    suffix = uuid.uuid4().hex[:6]
    tokens: dict[str, str | None] = {"admin": server.token, "anonymous": None}
    for role in ("reader", "writer", "dbadmin", "nobody"):
        name = f"{role}_{suffix}"
        server.sql(f"CREATE USER {name}", db)
        tokens[role] = server.new_token(name, db)
        right = {"reader": "READ", "writer": "WRITE", "dbadmin": "ADMIN"}.get(role)
        if right:
            server.sql(f"GRANT {right} ON DATABASE {db} TO {name}", db)
        tokens[role + "_name"] = name
    server.sql("CREATE TABLE t (id INT, v DOUBLE); INSERT INTO t VALUES (1, 1.0)", db)
    return tokens


ROLES = ["admin", "dbadmin", "writer", "reader", "nobody", "anonymous"]
DENIED = {"nobody": 403, "anonymous": 401}


def expect(role: str, allowed: set[str], ok: int) -> int:
    return ok if role in allowed else DENIED.get(role, 403)


ALL = {"admin", "dbadmin", "writer", "reader"}
WRITERS = {"admin", "dbadmin", "writer"}
ADMINS = {"admin", "dbadmin"}


@pytest.mark.parametrize("role", ROLES)
def test_each_role_against_each_route(server: Server, db: str, people: dict, role: str):
    token = people[role]

    def call(method: str, path: str, **kwargs) -> int:
        response = server.request(method, path, token=token, **kwargs)
        assert (
            response.headers["Content-Type"].startswith(("application/json", "text/csv"))
            or response.status_code == 204
        )
        if response.status_code >= 400:
            assert response.json()["error"]
        if response.status_code == 401:
            assert response.headers["WWW-Authenticate"].startswith("Bearer")
        return response.status_code

    p = {"db": db}
    assert call("GET", "/exec", params={**p, "query": "SELECT * FROM t"}) == expect(role, ALL, 200)
    assert call("GET", "/exp", params={**p, "query": "SELECT * FROM t"}) == expect(role, ALL, 200)
    insert = call("POST", "/exec", params=p, data=b"INSERT INTO t VALUES (2, 2.0)")
    assert insert == expect(role, WRITERS, 200)
    imported = call("POST", "/imp", params={**p, "table": "t"}, data=b"id,v\n3,3.0\n")
    assert imported == expect(role, WRITERS, 200)
    written = call("POST", "/write", params=p, data=b"t id=4i,v=4.0\n")
    # WRITE may grow the schema through /write (here: the `timestamp` column it adds).
    assert written == expect(role, WRITERS, 204)
    ddl = call("POST", "/exec", params=p, data=b"CREATE TABLE u (id INT)")
    assert ddl == expect(role, ADMINS, 200)
    assert call("GET", "/api/stats", params=p) == expect(role, ALL, 200)
    assert call("GET", "/health") == 200
    assert call("GET", "/openapi.json") == 200
    users = call("GET", "/exec", params={**p, "query": "SHOW USERS"})
    assert users == expect(role, ADMINS, 200)


def test_writer_grows_line_protocol_tables(server: Server, db: str, people):
    created = server.post(
        "/write", params={"db": db}, data=b"m,host=a cpu=1.5\n", token=people["writer"]
    )
    assert created.status_code == 204, created.text
    grown = server.post(
        "/write", params={"db": db}, data=b"m,host=b cpu=2.5,new=1\n", token=people["writer"]
    )
    assert grown.status_code == 204, grown.text
    assert server.rows("SELECT count(*), max(new) FROM m", db) == [[2, 1.0]]
    refused = server.post(
        "/write", params={"db": db}, data=b"m,host=c cpu=3.5\n", token=people["reader"]
    )
    assert refused.status_code == 403 and "WRITE" in refused.json()["error"]
    ddl = server.post(
        "/exec", params={"db": db}, data=b"CREATE TABLE x (id INT)", token=people["writer"]
    )
    assert ddl.status_code == 403 and "ADMIN" in ddl.json()["error"]


def test_revoked_select_beats_database_read(server: Server, db: str, people):
    server.sql("CREATE TABLE secret (id INT); INSERT INTO secret VALUES (7)", db)
    server.sql(f"REVOKE SELECT ON secret FROM {people['reader_name']}", db)
    reader = people["reader"]
    denied = server.exec("SELECT * FROM secret", db, token=reader)
    assert denied.status_code == 403 and "secret" in denied.json()["error"]
    export = server.get("/exp", params={"db": db, "query": "SELECT * FROM secret"}, token=reader)
    assert export.status_code == 403
    assert server.rows("SELECT id FROM t", db, token=reader) == [[1]]
    assert ["secret", "table"] not in server.rows("SHOW TABLES", db, token=reader)
    server.sql(f"GRANT SELECT ON secret TO {people['reader_name']}", db)
    assert server.rows("SELECT id FROM secret", db, token=reader) == [[7]]


def test_grant_select_on_one_table(server: Server, db: str, people):
    server.sql("CREATE TABLE other (id INT)", db)
    server.sql(f"GRANT SELECT ON t TO {people['nobody_name']}", db)
    nobody = people["nobody"]
    assert server.rows("SELECT id FROM t", db, token=nobody) == [[1]]
    assert server.exec("SELECT id FROM other", db, token=nobody).status_code == 403


def test_a_token_for_one_database_on_another(server: Server, db: str, people):
    other = "t_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {other}")
    server.sql("CREATE TABLE t (id INT)", other)
    for role in ("reader", "writer", "dbadmin"):
        response = server.exec("SELECT * FROM t", other, token=people[role])
        assert response.status_code == 403, role
        assert f"database '{other}'" in response.json()["error"]
    grant = server.exec(
        f"GRANT READ ON DATABASE {other} TO {people['reader_name']}", db, token=people["dbadmin"]
    )
    assert grant.status_code == 403


def test_anonymous_and_public(server: Server, db: str, people):
    assert server.exec("SELECT * FROM t", db, token=None).status_code == 401
    server.sql(f"GRANT READ ON DATABASE {db} TO PUBLIC", db)
    assert server.rows("SELECT id FROM t", db, token=None) == [[1]]
    assert server.rows("SELECT id FROM t", db, token=people["nobody"]) == [[1]]
    insert = server.exec("INSERT INTO t VALUES (9, 9.0)", db, token=None)
    assert insert.status_code == 401
    server.sql(f"REVOKE READ ON DATABASE {db} FROM PUBLIC", db)
    assert server.exec("SELECT * FROM t", db, token=None).status_code == 401


def test_wrong_revoked_and_expired_tokens(server: Server, db: str, people):
    for header in ("Bearer kdb_wrong", "Basic abc", "Bearer"):
        response = requests.get(
            server.url + "/exec",
            params={"query": "SELECT 1", "db": db},
            headers={"Authorization": header},
            timeout=10,
        )
        assert response.status_code == 401, header
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    reader = people["reader"]
    server.sql(f"DROP TOKEN '{reader}'", db)
    assert server.exec("SELECT 1", db, token=reader).status_code == 401
    short = server.rows(f"CREATE TOKEN FOR {people['reader_name']} EXPIRES IN '1s'", db)[0][0]
    assert server.exec("SELECT 1", db, token=short).status_code == 200
    time.sleep(1.2)
    assert server.exec("SELECT 1", db, token=short).status_code == 401


def test_dropping_a_user_ends_their_session(server: Server, db: str, people):
    session = requests.Session()
    opened = session.post(server.url + "/api/session", data=people["writer"], timeout=10)
    assert opened.status_code == 200
    query = {"query": "SELECT 1", "db": db}
    assert session.get(server.url + "/exec", params=query, timeout=10).status_code == 200
    server.sql(f"DROP USER {people['writer_name']}", db)
    assert session.get(server.url + "/exec", params=query, timeout=10).status_code == 401


# -- rights before existence, rights at every moment (issue 13) ------------------------------


def test_a_select_without_from_needs_a_right_in_the_database(server: Server, db: str, people):
    for role, status in (("anonymous", 401), ("nobody", 403)):
        response = server.exec("SELECT 1 AS one", db, token=people[role])
        assert response.status_code == status, role
        assert "READ" in response.json()["error"]
    assert server.rows("SELECT 1 AS one", db, token=people["reader"]) == [[1]]
    server.sql(f"GRANT SELECT ON t TO {people['nobody_name']}", db)
    assert server.rows("SELECT 1 AS one", db, token=people["nobody"]) == [[1]]


def test_without_a_right_nothing_tells_what_exists(server: Server, db: str, people):
    other = "t_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {other}")
    server.sql("CREATE TABLE t (id INT)", other)
    missing = "nope_" + uuid.uuid4().hex[:8]

    def answer(role: str, method: str, path: str, name: str, params: dict) -> tuple[int, str]:
        """Status and error, with the name asked for written as X."""
        params = {k: v.format(name=name) for k, v in params.items()}
        data = b"id\n1\n" if method == "POST" else None
        response = server.request(method, path, params=params, data=data, token=people[role])
        return response.status_code, response.json()["error"].replace(f"'{name}'", "'X'")

    tables = [
        ("GET", "/exec", {"query": "SELECT * FROM {name}"}),
        ("GET", "/api/changes", {"table": "{name}", "format": "json"}),
        ("GET", "/api/rev", {"table": "{name}"}),
        ("GET", "/api/subscribe", {"query": "SUBSCRIBE SELECT * FROM {name}"}),
        ("POST", "/imp", {"table": "{name}"}),
    ]
    databases = [
        ("GET", "/exec", {"db": "{name}", "query": "SELECT 1"}),
        ("GET", "/api/stats", {"db": "{name}"}),
        ("GET", "/api/changes", {"db": "{name}", "table": "t"}),
        ("POST", "/write", {"db": "{name}"}),
    ]
    for role, status in (("anonymous", 401), ("nobody", 403), ("dbadmin", 403)):
        checks = [(m, p, {**q, "db": db}, "t") for m, p, q in tables if role != "dbadmin"]
        checks += [(m, p, q, other) for m, p, q in databases]
        for method, path, params, existing in checks:
            there = answer(role, method, path, existing, params)
            assert there[0] == status, (role, path, there)
            assert answer(role, method, path, missing, params) == there, (role, path)
    # Past the database's door with a right on one table: every other table is checked
    # before it is looked for.
    server.sql(f"CREATE TABLE shown (id INT); GRANT SELECT ON shown TO {people['nobody_name']}", db)
    for method, path, params in tables:
        params = {**params, "db": db}
        there = answer("nobody", method, path, "t", params)
        assert there[0] == 403, (path, there)
        assert answer("nobody", method, path, missing, params) == there, path
    # Those who may read learn what exists.
    assert (
        server.get(
            "/api/changes", params={"db": db, "table": missing}, token=people["reader"]
        ).status_code
        == 404
    )
    assert server.exec(f"SELECT * FROM {missing}", db, token=people["reader"]).status_code == 400
    assert server.get("/exec", params={"db": missing, "query": "SELECT 1"}).status_code == 404
    assert server.rows("SELECT count(*) FROM t", db) == [[1]]


def test_a_token_a_database_admin_minted_stays_in_that_database(server: Server, db: str, people):
    other = "t_" + uuid.uuid4().hex[:12]
    server.sql(f"CREATE DATABASE {other}")
    server.sql("CREATE TABLE secret (id INT); INSERT INTO secret VALUES (42)", other)
    name = "m_" + uuid.uuid4().hex[:8]
    server.sql(f"CREATE USER {name}", db)
    minted = server.rows(f"CREATE TOKEN FOR {name}", db, token=people["dbadmin"])[0][0]
    # Granted on the other database after the token was minted: the token does not carry it.
    server.sql(f"GRANT ADMIN ON DATABASE {other} TO {name}", other)
    refused = server.exec("SELECT * FROM secret", other, token=minted)
    assert refused.status_code == 403 and f"minted in database '{db}'" in refused.json()["error"]
    dropped = server.exec("DROP TABLE secret", other, token=minted)
    assert dropped.status_code == 403
    assert (
        server.get(
            "/api/changes", params={"db": other, "table": "secret"}, token=minted
        ).status_code
        == 403
    )
    assert server.rows("SELECT id FROM secret", other) == [[42]]
    # In its own database it has its user's rights of the moment.
    assert server.exec("SELECT * FROM t", db, token=minted).status_code == 403
    server.sql(f"GRANT READ ON DATABASE {db} TO {name}", db)
    assert server.rows("SELECT id FROM t", db, token=minted) == [[1]]
    # A token the admin user mints for the same user reaches the other database.
    unlimited = server.new_token(name, db)
    assert server.rows("SELECT id FROM secret", other, token=unlimited) == [[42]]


def test_a_revoke_takes_effect_at_the_next_request(server: Server, db: str, people):
    reader, name = people["reader"], people["reader_name"]
    browser = requests.Session()
    assert browser.post(server.url + "/api/session", data=reader, timeout=10).status_code == 200
    query = {"db": db, "query": "SELECT id FROM t"}
    assert server.get("/exec", params=query, token=reader).status_code == 200
    assert browser.get(server.url + "/exec", params=query, timeout=10).status_code == 200
    server.sql(f"REVOKE READ ON DATABASE {db} FROM {name}", db)
    assert server.get("/exec", params=query, token=reader).status_code == 403
    assert browser.get(server.url + "/exec", params=query, timeout=10).status_code == 403
    feed = {"db": db, "table": "t", "format": "json"}
    assert server.get("/api/changes", params=feed, token=reader).status_code == 403
    server.sql(f"GRANT READ ON DATABASE {db} TO {name}", db)
    assert browser.get(server.url + "/exec", params=query, timeout=10).status_code == 200


def _subscribe(server: Server, token: str, query: str, ident: str | None = None) -> str:
    params = {"query": query, "wait": "0", **({"id": ident} if ident else {})}
    response = server.get("/api/subscribe", params=params, token=token)
    assert response.status_code == 200, response.text
    return next(line[4:] for line in response.text.splitlines() if line.startswith("id: "))


def test_one_user_cannot_push_out_anothers_subscriptions(tmp_path):
    from tests.http.conftest import start_server

    data = tmp_path / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("subscriptions_per_user = 3\n")
    server = start_server(data)
    try:
        server.sql("CREATE TABLE s (id INT PRIMARY KEY, v INT); INSERT INTO s VALUES (1, 1)")
        tokens = {}
        for name in ("greedy", "quiet"):
            server.sql(f"CREATE USER {name}; GRANT READ ON DATABASE demo TO {name}")
            tokens[name] = server.new_token(name)
        quiet = _subscribe(server, tokens["quiet"], "SUBSCRIBE SELECT id, v FROM s")
        greedy = [
            _subscribe(server, tokens["greedy"], f"SUBSCRIBE SELECT id, v FROM s WHERE v > {-n}")
            for n in range(20)
        ]
        assert server.get("/health", token=None).status_code == 200
        # The quiet user's subscription is still there (asked again: the same id answers).
        again = _subscribe(server, tokens["quiet"], "SUBSCRIBE SELECT id, v FROM s", quiet)
        assert again == quiet
        # Of the greedy user's, only the last 3 are kept; the first asks for a new snapshot.
        last = _subscribe(
            server, tokens["greedy"], "SUBSCRIBE SELECT id, v FROM s WHERE v > -19", greedy[-1]
        )
        assert last == greedy[-1]
        first = _subscribe(
            server, tokens["greedy"], "SUBSCRIBE SELECT id, v FROM s WHERE v > 0", greedy[0]
        )
        assert first != greedy[0]
        stats = server.get("/api/stats").json()
        assert stats  # the server answers on
    finally:
        assert server.stop() == 0

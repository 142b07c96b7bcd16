"""A keep-alive connection checks its bearer token once, and reuses the check for the same
Authorization header while nothing changed: every DROP TOKEN, DROP USER, REVOKE and a
token's expiry still take effect at the connection's next request. Each test sends all its
requests as one user over one keep-alive `requests.Session` (one connection, checked at
the end), and makes its changes as the admin over other connections."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import requests

from tests.http.conftest import Server


@contextmanager
def one_connection(server: Server) -> Iterator[requests.Session]:
    """A session whose requests must all go over one connection (asserted at the end)."""
    with requests.Session() as session:
        yield session
        adapter = session.get_adapter(server.url)
        assert isinstance(adapter, requests.adapters.HTTPAdapter)
        pools = adapter.poolmanager.pools
        made = [pools[key].num_connections for key in pools.keys()]
        assert made == [1], f"the session opened {made} connections, not one"


def _user(server: Server, db: str, expires: str = "") -> tuple[str, str]:
    """A new user with READ on `db`, and a token of theirs."""
    name = "u_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE USER {name}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO {name}", db)
    token = server.rows(f"CREATE TOKEN FOR {name}{expires}", db)[0][0]
    return name, token


def _read(server: Server, session: requests.Session, db: str, token: str) -> requests.Response:
    return session.get(
        f"{server.url}/api/changes",
        params={"db": db, "table": "t", "format": "json"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def _table(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("INSERT INTO t VALUES (1)", db)


def test_drop_token_refuses_the_next_request(server: Server, db: str) -> None:
    _table(server, db)
    _user_name, token = _user(server, db)
    with one_connection(server) as session:
        for _ in range(3):
            assert _read(server, session, db, token).status_code == 200
        server.sql(f"DROP TOKEN '{token}'", db)
        refused = _read(server, session, db, token)
        assert refused.status_code == 401, refused.text
        assert "wrong, expired or revoked" in refused.json()["error"]


def test_drop_user_refuses_the_next_request(server: Server, db: str) -> None:
    _table(server, db)
    name, token = _user(server, db)
    with one_connection(server) as session:
        assert _read(server, session, db, token).status_code == 200
        assert _read(server, session, db, token).status_code == 200
        server.sql(f"DROP USER {name}", db)
        assert _read(server, session, db, token).status_code == 401


def test_revoke_refuses_the_next_request(server: Server, db: str) -> None:
    _table(server, db)
    name, token = _user(server, db)
    with one_connection(server) as session:
        assert _read(server, session, db, token).status_code == 200
        assert _read(server, session, db, token).status_code == 200
        server.sql(f"REVOKE READ ON DATABASE {db} FROM {name}", db)
        refused = _read(server, session, db, token)
        assert refused.status_code == 403, refused.text
        server.sql(f"GRANT READ ON DATABASE {db} TO {name}", db)
        assert _read(server, session, db, token).status_code == 200


def test_an_expired_token_is_refused_at_the_next_request(server: Server, db: str) -> None:
    _table(server, db)
    _name, token = _user(server, db, expires=" EXPIRES IN '2s'")
    with one_connection(server) as session:
        began = time.monotonic()
        assert _read(server, session, db, token).status_code == 200
        assert _read(server, session, db, token).status_code == 200
        time.sleep(max(0.0, began + 3.0 - time.monotonic()))
        refused = _read(server, session, db, token)
        assert refused.status_code == 401, refused.text


def test_another_header_on_the_connection_is_checked(server: Server, db: str) -> None:
    _table(server, db)
    name, token = _user(server, db)
    with one_connection(server) as session:
        assert _read(server, session, db, token).status_code == 200
        wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
        assert _read(server, session, db, wrong).status_code == 401
        assert _read(server, session, db, token).status_code == 200
        # The admin's token on the same connection acts as the admin, not as the user.
        server.sql("CREATE TABLE secret (id INT PRIMARY KEY)", db)
        server.sql(f"REVOKE SELECT ON secret FROM {name}", db)
        mine = session.get(
            f"{server.url}/api/changes",
            params={"db": db, "table": "secret", "format": "json"},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert mine.status_code == 403, mine.text
        admin = session.get(
            f"{server.url}/api/changes",
            params={"db": db, "table": "secret", "format": "json"},
            headers={"Authorization": f"Bearer {server.token}"},
            timeout=30,
        )
        assert admin.status_code == 200, admin.text

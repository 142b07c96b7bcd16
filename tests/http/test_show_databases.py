"""SHOW DATABASES through a real server: only the databases the caller holds a right in."""

from __future__ import annotations

import uuid

from refimpl.sql import ast
from refimpl.sql.parser import parse
from refimpl.sql.printer import to_sql
from tests.http.conftest import Server


def shown(server: Server, db: str, token: object) -> list[str]:
    response = server.exec("SHOW DATABASES", db, token)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["columns"] == [{"name": "database", "type": "STRING"}]
    return [row[0] for row in answer["dataset"]]


def test_each_caller_sees_the_databases_it_holds_a_right_in(server: Server, db: str) -> None:
    uniq = uuid.uuid4().hex[:8]
    other, apart = f"o_{uniq}", f"p_{uniq}"
    for name in (other, apart):
        server.sql(f"CREATE DATABASE {name}")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", other)
    server.sql(f"CREATE USER r_{uniq}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO r_{uniq}", db)
    reader = server.new_token(f"r_{uniq}", db)
    server.sql(f"CREATE USER s_{uniq}", db)
    server.sql(f"GRANT SELECT ON t TO s_{uniq}", other)  # a table's right is a right there
    selector = server.new_token(f"s_{uniq}", db)

    everything = shown(server, db, server.token)
    assert {db, other, apart, "demo"} <= set(everything)
    assert everything == sorted(everything, key=str.lower)
    listed_for_reader = shown(server, db, reader)
    assert db in listed_for_reader and other not in listed_for_reader
    assert apart not in listed_for_reader
    listed_for_selector = shown(server, other, selector)
    assert other in listed_for_selector and db not in listed_for_selector
    assert apart not in listed_for_selector

    # A right granted later shows the database at once; one revoked hides it.
    server.sql(f"GRANT READ ON DATABASE {apart} TO r_{uniq}", apart)
    assert apart in shown(server, db, reader)
    server.sql(f"REVOKE READ ON DATABASE {apart} FROM r_{uniq}", apart)
    assert apart not in shown(server, db, reader)


def test_a_caller_without_a_right_in_the_request_database_learns_nothing(
    server: Server, db: str
) -> None:
    uniq = uuid.uuid4().hex[:8]
    server.sql(f"CREATE USER n_{uniq}", db)
    token = server.new_token(f"n_{uniq}", db)
    response = server.exec("SHOW DATABASES", db, token)
    assert response.status_code == 403, response.text
    assert "READ" in response.json()["error"]
    assert server.exec("SHOW DATABASES", db, None).status_code == 401


def test_show_databases_parses_and_prints() -> None:
    statement = parse("show databases").statements[0]
    assert statement == ast.ShowDatabases()
    assert to_sql(statement) == "SHOW DATABASES"
    # DATABASES stays a name elsewhere: the keyword is one only after SHOW.
    assert parse("SELECT databases FROM databases").statements[0] is not None

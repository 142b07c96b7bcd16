"""A form-encoded /exec body: the field `query`, or the SQL itself (what `curl -d` sends).

The rule is a pure function of the body (`refimpl.http.exec_body`), checked by properties;
real `curl` then sends the bodies a person types, to a real server.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from urllib.parse import urlencode

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from refimpl.errors import BadRequest
from refimpl.http.exec_body import sql_of_form_body
from tests.http.conftest import Server

SQL_TEXT = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80)


@given(SQL_TEXT, SQL_TEXT)
def test_a_body_with_whitespace_is_the_sql_byte_for_byte(before: str, after: str):
    sql = f"{before} {after}"
    assume(sql.strip() and not sql.startswith("query="))  # blank: no SQL (a 400 at /exec)
    assert sql_of_form_body(sql.encode()) == sql


@given(SQL_TEXT)
def test_what_a_form_encoder_writes_is_decoded(sql: str):
    assert sql_of_form_body(urlencode({"query": sql}).encode()) == sql


# Escapes of ASCII only: `%80` alone is not UTF-8, a refusal of its own (the next test).
@given(
    st.from_regex(
        r"[a-z]{1,8}=(?:[A-Za-z0-9+]|%[2-7][0-9A-F]){0,8}"
        r"(&[a-z]{1,8}=[A-Za-z0-9+]{0,8}){0,3}",
        fullmatch=True,
    )
)
def test_a_form_without_the_query_field_is_refused_with_the_ways_that_work(body: str):
    if body.startswith("query="):
        return
    with pytest.raises(BadRequest, match=r"curl -d.*--data-binary.*--data-urlencode"):
        sql_of_form_body(body.encode())


def test_a_form_whose_escapes_are_not_utf8_is_refused_as_such():
    with pytest.raises(BadRequest, match="not valid UTF-8 once decoded"):
        sql_of_form_body(b"a=%80")


def test_a_word_without_a_value_is_the_sql():
    assert sql_of_form_body(b"CHECKPOINT") == "CHECKPOINT"
    assert sql_of_form_body(b"  ") is None


def test_a_query_form_with_other_fields_is_refused():
    with pytest.raises(BadRequest, match="unknown form field"):
        sql_of_form_body(b"query=SELECT+1&db=demo")
    with pytest.raises(BadRequest, match="given 2 times"):
        sql_of_form_body(b"query=SELECT+1&query=SELECT+2")


def _curl(server: Server, db: str, *args: str) -> tuple[int, dict]:
    command = [
        "curl",
        "-sS",
        "-o",
        "-",
        "-w",
        "\n%{http_code}",
        "-H",
        f"Authorization: Bearer {server.token}",
        *args,
        f"{server.url}/exec?db={db}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=True)
    body, _, status = done.stdout.rpartition("\n")
    return int(status), json.loads(body)


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl binary on this machine")
def test_curl_d_sends_sql_that_runs_as_written(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, name STRING, dept STRING)", db)
    status, answer = _curl(
        server, db, "-d", "INSERT INTO t VALUES (1, 'Asha', 'R&D'), (2, 'Om', 'Sales')"
    )
    assert (status, answer["message"]) == (200, "2 row(s) inserted")
    status, answer = _curl(server, db, "-d", "SELECT 1+1 AS two")
    assert (status, answer["query"], answer["dataset"]) == (200, "SELECT 1+1 AS two", [[2]])
    status, answer = _curl(server, db, "-d", "SELECT id FROM t WHERE name LIKE '%a%'")
    assert (status, answer["dataset"]) == (200, [[1]])
    status, answer = _curl(server, db, "-d", "SELECT id FROM t WHERE dept = 'R&D'")
    assert (status, answer["dataset"]) == (200, [[1]])
    status, answer = _curl(server, db, "--data-urlencode", "query=SELECT 1+1 AS two")
    assert (status, answer["dataset"]) == (200, [[2]])
    status, answer = _curl(
        server, db, "--data-binary", "SELECT 3 AS three", "-H", "Content-Type: text/plain"
    )
    assert (status, answer["dataset"]) == (200, [[3]])


@pytest.mark.skipif(shutil.which("curl") is None, reason="no curl binary on this machine")
def test_curl_d_with_a_form_that_is_not_ours_names_the_ways_that_work(server: Server, db: str):
    status, answer = _curl(server, db, "-d", "sql=SELECT+1")
    assert status == 400
    assert "curl -d" in answer["error"] and "--data-urlencode 'query=" in answer["error"]
    assert server.rows("SHOW TABLES", db) == []

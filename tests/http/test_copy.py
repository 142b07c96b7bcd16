"""COPY over /exec: rows in as the body of a POST, rows out streamed; COPY FROM a file of the
import folder for the admin only."""

from __future__ import annotations

import os

import pytest
import requests

from tests.http.conftest import Server


def copy_in(
    server: Server,
    db: str,
    sql: str,
    body: bytes,
    content_type: str = "text/csv",
    token: object = None,
) -> requests.Response:
    extra = {} if token is None else {"token": token}
    return server.post(
        "/exec",
        params={"db": db, "query": sql},
        data=body,
        headers={"Content-Type": content_type},
        **extra,
    )


def copy_out(server: Server, db: str, sql: str) -> requests.Response:
    return server.get("/exec", params={"db": db, "query": sql})


def test_csv_with_header_in_and_out(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, v DOUBLE, ts TIMESTAMP)", db)
    body = (
        b'id,name,v,ts\n1,"a,b",1.5,2026-01-02T03:04:05Z\n2,,2,\n3,"",,\n'
        b'4,"two\nlines ""quoted""",,\n'
    )
    answer = copy_in(server, db, "COPY t FROM STDIN WITH (FORMAT csv, HEADER)", body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["count"] == 4
    assert server.rows("SELECT * FROM t ORDER BY id", db) == [
        [1, "a,b", 1.5, "2026-01-02T03:04:05.000Z"],
        [2, None, 2.0, None],  # an unquoted empty field is NULL
        [3, "", None, None],  # a quoted one is the empty string
        [4, 'two\nlines "quoted"', None, None],
    ]
    out = copy_out(server, db, "COPY t TO STDOUT WITH (FORMAT csv, HEADER)")
    assert out.status_code == 200, out.text
    assert out.headers["Content-Type"].startswith("text/csv")
    server.sql("TRUNCATE t", db)
    again = copy_in(server, db, "COPY t FROM STDIN WITH (FORMAT csv, HEADER)", out.content)
    assert again.status_code == 200, again.text
    assert server.rows("SELECT * FROM t ORDER BY id", db)[2:] == [
        [3, "", None, None],
        [4, 'two\nlines "quoted"', None, None],
    ]


def test_text_format_and_a_column_list(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, n INT)", db)
    body = b"1\ttab\\there\n2\t\\N\n\\.\n"
    answer = copy_in(server, db, "COPY t (id, name) FROM STDIN", body, "text/plain")
    assert answer.status_code == 200, answer.text
    assert server.rows("SELECT * FROM t ORDER BY id", db) == [
        [1, "tab\there", None],
        [2, None, None],
    ]
    out = copy_out(server, db, "COPY (SELECT id, name FROM t ORDER BY id) TO STDOUT")
    assert out.headers["Content-Type"].startswith("text/plain")
    assert out.content == b"1\ttab\\there\n2\t\\N\n"


@pytest.mark.parametrize(
    ("body", "where"),
    [
        (b"id,v\n1,1\n2,x\n", "line 3, column 2 (v)"),
        (b"id,v\n1,1\n2\n", "line 3: missing data"),
        (b"id,v\n1,1\n2,2,3\n", "line 3: extra data"),
        (b'id,v\n1,1\n2,"2\n', "line 3"),
    ],
)
def test_the_first_bad_field_stops_all(server: Server, db: str, body: bytes, where: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    answer = copy_in(server, db, "COPY t FROM STDIN (FORMAT csv, HEADER true)", body)
    assert answer.status_code == 400, answer.text
    assert where in answer.json()["error"]
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ("COPY t FROM STDIN (FORMAT json)", "use text, csv or binary"),
        ("COPY t FROM STDIN (FORMAT binary)", "the data ends inside the signature"),
        ("COPY t FROM STDIN (FORMAT binary, HEADER)", "HEADER is not an option of FORMAT binary"),
        ("COPY t FROM STDIN (FORMAT csv, FORMAT csv)", "given twice"),
        ("COPY t FROM STDIN (SIZE '1')", "no option 'size'"),
        ("COPY t FROM STDIN (DELIMITER ';;')", "one character"),
        ("COPY t FROM STDIN (QUOTE '''')", "FORMAT csv only"),
        ("COPY t (nope) FROM STDIN", "no column 'nope'"),
        ("COPY nope FROM STDIN", "nope"),
    ],
)
def test_bad_statements_are_400(server: Server, db: str, sql: str, said: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    answer = copy_in(server, db, sql, b"1\t1\n")
    assert answer.status_code in (400, 404), answer.text
    assert said in answer.json()["error"]
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


def test_from_stdin_without_rows_says_how(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    answer = server.exec("COPY t FROM STDIN", db)
    assert answer.status_code == 400
    assert "POST /exec?query=COPY" in answer.json()["error"]


def test_one_copy_is_one_transaction_in_the_change_stream(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    body = "".join(f"{i},{i * 10}\n" for i in range(1, 101)).encode()
    assert copy_in(server, db, "COPY t FROM STDIN (FORMAT csv)", body).status_code == 200
    answer = server.get("/api/changes", params={"db": db, "table": "t", "format": "json"})
    changes = [c for c in answer.json()["changes"] if c["op"] == "upsert"]
    assert len(changes) == 100
    assert len({c["lsn"] for c in changes}) == 1


def test_write_right_needed(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("CREATE USER reader; GRANT READ ON DATABASE " + db + " TO reader", db)
    token = server.new_token("reader", db)
    answer = copy_in(server, db, "COPY t FROM STDIN", b"1\n", token=token)
    assert answer.status_code == 403, answer.text


# --- COPY FROM a file -----------------------------------------------------------------------


def test_from_a_file_of_the_import_folder(server: Server, db: str) -> None:
    folder = server.data / "import"
    folder.mkdir(exist_ok=True)
    (folder / f"{db}.csv").write_bytes(b"id,v\n1,2\n3,4\n")
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)", db)
    done = server.sql(f"COPY t FROM '{db}.csv' WITH (FORMAT csv, HEADER)", db)
    assert done["count"] == 2
    assert server.rows("SELECT * FROM t ORDER BY id", db) == [[1, 2], [3, 4]]


def test_paths_out_of_the_import_folder_are_refused(server: Server, db: str) -> None:
    folder = server.data / "import"
    folder.mkdir(exist_ok=True)
    outside = server.data / f"{db}-outside.csv"
    outside.write_bytes(b"1\n")
    link = folder / f"{db}-link.csv"
    os.symlink(outside, link)
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    for name in (f"../{db}-outside.csv", str(outside), f"{db}-link.csv"):
        answer = server.exec(f"COPY t FROM '{name}'", db)
        assert answer.status_code == 400, (name, answer.text)
        assert "import folder" in answer.json()["error"]
    missing = server.exec("COPY t FROM 'missing.csv'", db)
    assert missing.status_code == 404, missing.text
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


def test_from_a_file_needs_the_admin(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("CREATE USER writer; GRANT WRITE ON DATABASE " + db + " TO writer", db)
    token = server.new_token("writer", db)
    answer = server.exec("COPY t FROM 'x.csv'", db, token=token)
    assert answer.status_code == 403, answer.text


def test_what_curl_sends_is_the_rows_and_other_types_are_refused(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)", db)
    sql = "COPY t FROM STDIN (FORMAT csv)"
    curl = copy_in(server, db, sql, b"1,a b&c=d\n", "application/x-www-form-urlencoded")
    assert curl.status_code == 200, curl.text
    assert server.rows("SELECT s FROM t", db) == [["a b&c=d"]]
    json_body = copy_in(server, db, sql, b"2,x\n", "application/json")
    assert json_body.status_code == 400
    assert "text/csv" in json_body.json()["error"]


def test_copy_to_reads_with_the_callers_rights(server: Server, db: str) -> None:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY)", db)
    server.sql("CREATE USER nobody_" + db, db)
    token = server.new_token("nobody_" + db, db)
    answer = server.get("/exec", params={"db": db, "query": "COPY t TO STDOUT"}, token=token)
    assert answer.status_code == 403, answer.text

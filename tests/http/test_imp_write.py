"""POST /imp (CSV) and POST /write (line protocol): typed, all or nothing."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from refimpl.http import csvimport
from tests.http.conftest import Server, running_server


def columns(server: Server, db: str, table: str) -> list[tuple[str, str]]:
    return [(r[0], r[1]) for r in server.rows(f"SHOW COLUMNS FROM {table}", db)]


# --- /imp ------------------------------------------------------------------------------------


def test_import_converts_to_column_types(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, price DOUBLE, ok BOOLEAN, ts TIMESTAMP, s SYMBOL)", db)
    body = (
        "ts,id,price,ok,s\n"
        "2026-10-22T05:43:31.573Z,1,1.5,true,A\n"
        '2026-10-22T05:43:32Z,2,,false,"B,C"\n'
        ",3,2,,\n"
    )
    response = server.post("/imp", params={"table": "t", "db": db}, data=body.encode())
    assert response.status_code == 200, response.text
    assert response.json() == {"table": "t", "count": 3, "message": "3 row(s) inserted"}
    assert server.rows("SELECT id, price, ok, ts, s FROM t ORDER BY id", db) == [
        [1, 1.5, True, "2026-10-22T05:43:31.573Z", "A"],
        [2, None, False, "2026-10-22T05:43:32.000Z", "B,C"],
        [3, 2.0, None, None, None],
    ]


def test_import_as_a_form_file(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, name STRING)", db)
    response = server.post(
        "/imp",
        params={"table": "t", "db": db},
        files={"data": ("t.csv", b"id,name\r\n1,x\r\n2,y\r\n", "text/csv")},
    )
    assert response.status_code == 200, response.text
    assert server.rows("SELECT count(*) FROM t", db) == [[2]]


def test_import_unknown_table_is_404(server: Server, db: str):
    response = server.post("/imp", params={"table": "nope", "db": db}, data=b"id\n1\n")
    assert response.status_code == 404 and "nope" in response.json()["error"]


def test_a_bad_row_imports_nothing(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT, price DOUBLE)", db)
    body = b"id,price\n1,1.5\n2,2.5\n3,cheap\n4,4.5\n"
    response = server.post("/imp", params={"table": "t", "db": db}, data=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert "line 4" in error and "column 2" in error
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


def test_a_key_conflict_at_install_imports_nothing(server: Server, db: str):
    server.sql("CREATE TABLE k (id INT PRIMARY KEY, v DOUBLE)", db)
    server.sql("INSERT INTO k VALUES (2, 0.5)", db)
    for body in (b"id,v\n1,1.5\n2,2.5\n3,3.5\n", b"id,v\n4,1.5\n5,2.5\n4,3.5\n"):
        response = server.post("/imp", params={"table": "k", "db": db}, data=body)
        assert response.status_code == 400, response.text
        assert "duplicate primary key" in response.json()["error"]
        assert server.rows("SELECT id, v FROM k", db) == [[2, 0.5]]


def test_an_import_into_a_dedup_table_keeps_the_last_row_of_a_key(server: Server, db: str):
    server.sql(
        "CREATE TABLE d (ts TIMESTAMP, s SYMBOL, v DOUBLE) TIMESERIES(ts) DEDUP KEY(ts, s)", db
    )
    server.sql("INSERT INTO d VALUES ('2026-01-01T00:00:00Z', 'A', 0.5)", db)
    body = (
        b"ts,s,v\n2026-01-01T00:00:00Z,A,1.5\n2026-01-01T00:00:01Z,A,2.5\n"
        b"2026-01-01T00:00:01Z,A,3.5\n"
    )
    response = server.post("/imp", params={"table": "d", "db": db}, data=body)
    assert response.status_code == 200, response.text
    assert server.rows("SELECT ts, v FROM d ORDER BY ts", db) == [
        ["2026-01-01T00:00:00.000Z", 1.5],
        ["2026-01-01T00:00:01.000Z", 3.5],
    ]


def test_import_header_problems(server: Server, db: str):
    server.sql("CREATE TABLE t (id INT)", db)
    for body, words in [
        (b"id,colour\n1,red\n", "colour"),
        (b"id,id\n1,1\n", "twice"),
        (b"", "empty"),
        (b"id\n1,2\n", "line 2"),
        (b'id\n"1\n', "line"),
    ]:
        response = server.post("/imp", params={"table": "t", "db": db}, data=body)
        assert response.status_code == 400, (body, response.text)
        assert words in response.json()["error"], (body, response.text)
    assert server.rows("SELECT count(*) FROM t", db) == [[0]]


# --- /write ----------------------------------------------------------------------------------


def test_write_creates_the_table(server: Server, db: str):
    body = (
        'trades,symbol=NABIL price=1510.5,qty=10i,note="first, \\"big\\"",ok=t'
        " 1700000000000000000\n"
        "trades,symbol=NICA price=800,qty=-3i,ok=false 1700000000001000000\n"
    )
    response = server.post("/write", params={"db": db}, data=body.encode())
    assert response.status_code == 204, response.text
    assert response.content == b""
    assert dict(columns(server, db, "trades")) == {
        "timestamp": "TIMESTAMP",
        "symbol": "SYMBOL",
        "price": "DOUBLE",
        "qty": "BIGINT",
        "note": "STRING",
        "ok": "BOOLEAN",
    }
    rows = server.rows(
        "SELECT timestamp, symbol, price, qty, note, ok FROM trades ORDER BY timestamp", db
    )
    assert rows == [
        ["2023-11-14T22:13:20.000Z", "NABIL", 1510.5, 10, 'first, "big"', True],
        ["2023-11-14T22:13:20.001Z", "NICA", 800.0, -3, None, False],
    ]
    show = server.rows("SHOW CREATE TABLE trades", db)[0][1]
    assert "TIMESERIES(timestamp)" in show.replace(" (", "(") and "DAY" in show


def test_write_adds_columns_and_defaults_the_time(server: Server, db: str):
    server.post("/write", params={"db": db}, data=b"m,host=a cpu=1.5\n")
    before = time.time()
    response = server.post("/write", params={"db": db}, data=b"m,host=b,rack=r1 cpu=2,mem=7i\n")
    assert response.status_code == 204, response.text
    assert [c for c, _ in columns(server, db, "m")][-2:] == ["rack", "mem"]
    rows = server.rows("SELECT host, rack, mem, timestamp FROM m ORDER BY host", db)
    assert [r[:3] for r in rows] == [["a", None, None], ["b", "r1", 7]]
    assert rows[1][3].startswith(time.strftime("%Y-%m-%d", time.gmtime(before)))


def test_write_precision(server: Server, db: str):
    response = server.post(
        "/write", params={"db": db, "precision": "s"}, data=b"p v=1 1700000000\n"
    )
    assert response.status_code == 204, response.text
    assert server.rows("SELECT timestamp FROM p", db) == [["2023-11-14T22:13:20.000Z"]]


def test_a_bad_line_writes_nothing(server: Server, db: str):
    body = b"good v=1 1700000000000000000\nother v=1\nbad v=oops\n"
    response = server.post("/write", params={"db": db}, data=body)
    assert response.status_code == 400
    body_json = response.json()
    assert "line 3" in body_json["error"] and body_json["position"] == {"line": 3, "column": 7}
    assert server.rows("SHOW TABLES", db) == []


def test_a_type_conflict_writes_nothing(server: Server, db: str):
    assert server.post("/write", params={"db": db}, data=b"m v=1i\n").status_code == 204
    response = server.post("/write", params={"db": db}, data=b"m v=2i\nm v=2.5\n")
    assert response.status_code == 400
    assert "line 2" in response.json()["error"] and "BIGINT" in response.json()["error"]
    assert server.rows("SELECT count(*) FROM m", db) == [[1]]


# --- large imports: streamed, one transaction ----------------------------------------------


def _csv(rows: int, bad_at: int | None = None) -> bytes:
    lines = ["id,ts,name,price"]
    for n in range(rows):
        price = "cheap" if n == bad_at else f"{n * 1.25}"
        lines.append(f"{n},2026-10-22T05:43:{n % 60:02d}Z,name-{n % 500}-of-the-sample,{price}")
    return ("\n".join(lines) + "\n").encode()


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("imp") / "data") as running:
        yield running


def test_a_large_import_is_streamed_in_bounded_memory(fresh: Server):
    fresh.sql("CREATE TABLE big (id BIGINT, ts TIMESTAMP, name SYMBOL, price DOUBLE)")
    body = _csv(150_000)
    assert len(body) > 7 * 1024 * 1024
    response = fresh.post("/imp", params={"table": "big"}, data=body, timeout=120)
    assert response.status_code == 200, response.text
    assert response.json()["count"] == 150_000
    # What the import needed beyond the rows it left in the table (which stay): not a copy
    # of the file, or two (bytes, then text), and not all of its rows twice over.
    passing = (fresh.memory_kb("VmHWM") - fresh.memory_kb()) / 1024
    assert passing < 2 * len(body) / (1024 * 1024), passing
    assert fresh.rows("SELECT count(*) AS n, max(id) AS top FROM big") == [[150_000, 149_999]]


def test_a_bad_row_late_in_a_large_import_imports_nothing(server: Server, db: str):
    server.sql("CREATE TABLE big (id BIGINT, ts TIMESTAMP, name SYMBOL, price DOUBLE)", db)
    rows = 3 * csvimport.BATCH_ROWS
    response = server.post(
        "/imp", params={"table": "big", "db": db}, data=_csv(rows, bad_at=rows - 2), timeout=120
    )
    assert response.status_code == 400, response.text
    assert f"line {rows}" in response.json()["error"]  # the header is line 1
    assert server.rows("SELECT count(*) FROM big", db) == [[0]]
    assert server.get("/health", timeout=2).status_code == 200


def test_writers_commit_while_a_large_import_is_read(fresh: Server):
    fresh.sql("CREATE TABLE bulk (id BIGINT, ts TIMESTAMP, name SYMBOL, price DOUBLE)")
    fresh.sql("CREATE TABLE single (id INT)")
    body = _csv(300_000)
    answered: list[float] = []

    def run_import() -> None:
        response = fresh.post("/imp", params={"table": "bulk"}, data=body, timeout=300)
        answered.append(time.monotonic())
        assert response.status_code == 200, response.text

    importer = threading.Thread(target=run_import)
    importer.start()
    time.sleep(0.5)  # the import's body is sent and being read
    committed = None
    while importer.is_alive() and committed is None:
        fresh.sql("INSERT INTO single VALUES (1)")
        if fresh.rows("SELECT count(*) FROM bulk") == [[0]]:
            committed = time.monotonic()  # committed while the import had not
    importer.join(300)
    assert committed is not None and answered and committed < answered[0]
    assert fresh.rows("SELECT count(*) FROM bulk") == [[300_000]]

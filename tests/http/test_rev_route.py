"""GET /api/rev against a real server: the document's examples, rights, and no waiting."""

from __future__ import annotations

import re
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from tests.http.conftest import Server

CANDLES = (
    "CREATE TABLE candles (time TIMESTAMP, symbol SYMBOL, close DOUBLE) TIMESERIES(time)"
    " PARTITION BY YEAR, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time)"
)
REV = re.compile(r"^([0-9a-f]{12})\.[0-9]+$")


def _boot_of(rev_text: str) -> str:
    """The boot part of a revision text; fails the test for text not shaped as one."""
    found = REV.match(rev_text)
    assert found is not None, rev_text
    return found.group(1)


def rev(
    server: Server, db: str, *symbols: str, token: object = None, timeout: float = 30, **params: str
):
    query = [("table", params.pop("table", "candles")), ("db", db)]
    query += [("symbol", s) for s in symbols] + list(params.items())
    if token is None:
        return server.get("/api/rev", params=query, timeout=timeout)
    return server.get("/api/rev", params=query, token=token, timeout=timeout)


def test_the_revisions_of_two_symbols(server: Server, db: str) -> None:
    server.sql(CANDLES, db)
    server.sql(
        "INSERT INTO candles VALUES ('2026-09-24T10:00:00Z', 'NABIL', 1510),"
        " ('2026-09-24T10:00:00Z', 'NEPSE', 2750)",
        db,
    )
    response = rev(server, db, "NABIL", "NEPSE")
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.headers.get("Cache-Control") == "no-store"
    body = response.json()
    assert set(body) == {"database", "table", "column", "boot", "table_rev", "revs"}
    assert (body["database"], body["table"], body["column"]) == (db, "candles", "symbol")
    boot = body["boot"]
    assert _boot_of(body["table_rev"]) == boot
    assert set(body["revs"]) == {"NABIL", "NEPSE"}
    assert all(_boot_of(r) == boot for r in body["revs"].values())
    # SQL gives the same texts.
    row = server.rows(
        "SELECT kdb_rev('candles'), kdb_rev('candles', 'NABIL'), kdb_rev('candles', 'NEPSE')", db
    )[0]
    assert row == [body["table_rev"], body["revs"]["NABIL"], body["revs"]["NEPSE"]]
    # A new NEPSE candle leaves NABIL's revision alone.
    server.sql("INSERT INTO candles VALUES ('2026-09-24T10:01:00Z', 'NEPSE', 2751)", db)
    after = rev(server, db, "NABIL", "NEPSE", column="symbol").json()
    assert after["revs"]["NABIL"] == body["revs"]["NABIL"]
    assert after["revs"]["NEPSE"] != body["revs"]["NEPSE"]
    assert after["table_rev"] != body["table_rev"]
    # No symbol: only the table's revision.
    assert rev(server, db).json()["revs"] == {}


def test_asking_by_the_wrong_column_says_which_one(server: Server, db: str) -> None:
    server.sql(CANDLES, db)
    response = rev(server, db, "NABIL", column="close")
    assert response.status_code == 400
    assert response.json() == {
        "error": "table 'candles' keeps revisions per value of column 'symbol', not 'close'"
    }
    server.sql("CREATE TABLE plain (id INT PRIMARY KEY, v INT)", db)
    response = rev(server, db, "x", table="plain", column="id")
    assert response.status_code == 400
    assert "no rev column" in response.json()["error"]
    body = rev(server, db, "x", table="plain").json()
    assert body["column"] is None
    assert body["revs"] == {"x": body["table_rev"]}


def test_unknown_table_is_404(server: Server, db: str) -> None:
    response = rev(server, db, "NABIL", table="nope")
    assert response.status_code == 404
    assert "nope" in response.json()["error"]
    assert rev(server, db, table="nope").status_code == 404


def test_rights(server: Server, db: str) -> None:
    server.sql(CANDLES, db)
    server.sql("CREATE TABLE other (id INT PRIMARY KEY)", db)
    suffix = db[-6:]
    reader, stranger, granted = f"r_{suffix}", f"s_{suffix}", f"g_{suffix}"
    for user in (reader, stranger, granted):
        server.sql(f"CREATE USER {user}", db)
    server.sql(f"GRANT READ ON DATABASE {db} TO {reader}", db)
    server.sql(f"GRANT SELECT ON candles TO {granted}", db)
    tokens = {u: server.new_token(u, db) for u in (reader, stranger, granted)}
    assert rev(server, db, "NABIL", token=tokens[reader]).status_code == 200
    assert rev(server, db, "NABIL", token=tokens[granted]).status_code == 200
    assert rev(server, db, table="other", token=tokens[granted]).status_code == 403
    assert rev(server, db, "NABIL", token=tokens[stranger]).status_code == 403
    server.sql(f"REVOKE SELECT ON candles FROM {reader}", db)
    assert rev(server, db, "NABIL", token=tokens[reader]).status_code == 403
    response = server.exec("SELECT kdb_rev('candles')", db, token=tokens[reader])
    assert response.status_code == 403
    assert rev(server, db, table="other", token=tokens[reader]).status_code == 200
    # Without credentials: send a token.
    response = server.get("/api/rev", params={"table": "candles", "db": db}, token=None)
    assert response.status_code == 401


def _poll_during_import(server: Server, db: str, rows: int) -> None:
    server.sql(CANDLES, db)
    server.sql("INSERT INTO candles VALUES ('2020-01-01T00:00:00Z', 'NABIL', 1)", db)
    start = rev(server, db, "NABIL", "NEPSE").json()
    lines = ["time,symbol,close"]
    base = datetime(2021, 1, 1, tzinfo=UTC)
    lines += [
        f"{(base + timedelta(seconds=i)).strftime('%Y-%m-%dT%H:%M:%SZ')},NEPSE,{i}"
        for i in range(rows)
    ]
    body = ("\n".join(lines) + "\n").encode()
    outcome: dict[str, object] = {}

    def load() -> None:
        response = server.post(
            "/imp", params={"table": "candles", "db": db}, data=body, timeout=300
        )
        outcome["status"] = response.status_code
        outcome["text"] = response.text
        outcome["done"] = time.monotonic()

    thread = threading.Thread(target=load)
    thread.start()
    polls = []  # (seconds taken, NEPSE moved, rows seen, NEPSE moved after the count)
    try:
        while thread.is_alive():
            began = time.monotonic()
            first = rev(server, db, "NABIL", "NEPSE", timeout=10)
            took = time.monotonic() - began
            assert first.status_code == 200, first.text
            count = server.rows("SELECT count(*) FROM candles WHERE symbol = 'NEPSE'", db)[0][0]
            last = rev(server, db, "NABIL", "NEPSE", timeout=10).json()
            polls.append(
                (
                    took,
                    first.json()["revs"]["NEPSE"] != start["revs"]["NEPSE"],
                    count,
                    last["revs"]["NEPSE"] != start["revs"]["NEPSE"],
                )
            )
            assert last["revs"]["NABIL"] == start["revs"]["NABIL"]
            time.sleep(0.01)
    finally:
        thread.join(300)
    assert outcome.get("status") == 200, outcome.get("text")
    end = rev(server, db, "NABIL", "NEPSE").json()
    assert end["revs"]["NEPSE"] != start["revs"]["NEPSE"]
    assert end["revs"]["NABIL"] == start["revs"]["NABIL"]
    # The import ran long enough to be watched, and no answer waited for it.
    unmoved = [p for p in polls if not p[1]]
    assert len(unmoved) >= 3, polls
    assert max(p[0] for p in polls) < 1.5, polls
    for _took, moved_before, count, moved_after in polls:
        if moved_before:
            assert count == rows  # the revision moved only once every row was committed
        if not moved_after:
            assert count == 0  # the rows were not there while the revision stood still


def test_rev_answers_at_once_while_an_import_runs(server: Server, db: str) -> None:
    _poll_during_import(server, db, 150_000)


@pytest.mark.long
def test_rev_answers_at_once_while_a_big_import_runs(server: Server, db: str) -> None:
    _poll_during_import(server, db, 300_000)

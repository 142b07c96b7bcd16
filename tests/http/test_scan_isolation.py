"""Scans hold no commit, and each answers one commit's rows (spec: sql, a long read of one
table holds nobody else's commits; issue: isolation, one user's work holds nobody else).

Readers scan a table of 200,000 rows back to back while a writer commits changes to it that
keep its row count even and its sum of `v` at 0 only as whole commits (two rows added, or
moved apart, in one statement): every scan's answer must be of one commit, never half of
one. Meanwhile another user's commits to another table, and their events on its stream,
come within a few seconds each. A SELECT with a LIMIT whose costly WHERE keeps only the last
row (it reads the whole table, for seconds) holds no commit either.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.http.conftest import Server, running_server
from tests.http.stream_client import open_stream
from tests.http.victims import tick_while

ROWS = 200_000
SCANNERS = 3
SCANS_EACH = 4  # at least, and for SCAN_SECONDS at least
SCAN_SECONDS = 6.0
DOCS = 500
TEXT = ("a" * 98 + "bb") * 100  # 10 KB
PATTERN = "%" + "a_" * 200 + "%"  # no match: every candidate of every row is tried
LIVELY_SECONDS = 3.0  # a victim's commit and its event within this while the reads run


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data: Path = tmp_path_factory.mktemp("scans") / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("statement_timeout_ms = 120000\n")
    with running_server(data) as running:
        running.sql("CREATE TABLE big (id INT PRIMARY KEY, v INT)")
        running.sql("CREATE TABLE docs (id INT PRIMARY KEY, body STRING)")
        running.sql("CREATE TABLE ticks (id INT PRIMARY KEY, v INT)")
        csv = "id,v\n" + "".join(f"{i},0\n" for i in range(ROWS))
        loaded = running.post(
            "/imp", params={"db": "demo", "table": "big"}, data=csv.encode(), timeout=300
        )
        assert loaded.status_code == 200, loaded.text
        for first in range(0, DOCS, 50):
            rows = ", ".join(f"({i}, '{TEXT}')" for i in range(first, first + 50))
            running.sql(f"INSERT INTO docs VALUES {rows}")
        running.sql(f"INSERT INTO docs VALUES ({DOCS}, 'ab')")  # the last row, the one kept
        running.sql("CREATE USER reader")
        running.sql("GRANT READ ON DATABASE demo TO reader")
        yield running


def test_scans_hold_no_commit_and_each_sees_one_commit(server: Server) -> None:
    reader = server.new_token("reader")
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    answers: list[requests.Response] = []
    scanning, stop = threading.Event(), threading.Event()
    until = time.monotonic() + SCAN_SECONDS

    def scan(number: int) -> None:
        n = 0
        while (n < SCANS_EACH or time.monotonic() < until) and not stop.is_set():
            # A literal of its own each time: no answer comes from the result cache.
            query = (
                f"SELECT count(*) AS n, sum(v) AS s FROM big WHERE id > -{number * 1000 + n + 1}"
            )
            answers.append(server.exec(query, token=reader))
            scanning.set()
            n += 1

    scanners = [threading.Thread(target=scan, args=(i,)) for i in range(SCANNERS)]
    for thread in scanners:
        thread.start()

    def join_scanners() -> None:
        for thread in scanners:
            thread.join()

    work = threading.Thread(target=join_scanners)
    work.start()
    written = {"pairs": 0}

    def write() -> None:
        # Each commit keeps the count even and the sum 0; half of one would not.
        while work.is_alive() and not stop.is_set():
            pair = written["pairs"]
            first, last = ROWS + 2 * pair, ROWS + 2 * pair + 1
            server.sql(f"INSERT INTO big VALUES ({first}, 1), ({last}, -1)")
            moved = pair * 7919 % ROWS
            server.sql(
                f"UPDATE big SET v = CASE WHEN id = {moved} THEN v + 1 ELSE v - 1 END"
                f" WHERE id IN ({moved}, {ROWS - 1 - moved})"
            )
            written["pairs"] += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert scanning.wait(120), "no scan answered"
        took = tick_while(server, victim, work, LIVELY_SECONDS)
    finally:  # a failed tick leaves no client of this test running into the next
        stop.set()
        work.join(120)
        writer.join(60)
        victim.close()

    assert len(answers) >= SCANNERS * SCANS_EACH
    for answer in answers:
        assert answer.status_code == 200, answer.text
        ((count, total),) = answer.json()["dataset"]
        assert count % 2 == 0 and total == 0, (count, total)
    assert len(took) >= 3, took
    assert server.rows("SELECT count(*) AS n FROM ticks") == [[len(took)]]
    assert server.rows("SELECT count(*) AS n, sum(v) AS s FROM big") == [
        [ROWS + 2 * written["pairs"], 0]
    ]
    assert "Traceback" not in server.log.read_text()


def test_a_limit_over_a_costly_where_holds_no_commit(server: Server) -> None:
    reader = server.new_token("reader")
    server.sql("DELETE FROM ticks")  # the ticks count from 1 again, on a stream opened after
    victim = open_stream(server, table="ticks", read_timeout=30)
    assert victim.take(1)[0]["event"] == "ready"
    found: dict[str, requests.Response] = {}
    query = f"SELECT id FROM docs WHERE body LIKE '{PATTERN}' OR body = 'ab' LIMIT 1"
    asking = threading.Thread(target=lambda: found.update(answer=server.exec(query, token=reader)))
    asking.start()
    took = tick_while(server, victim, asking, LIVELY_SECONDS)
    assert len(took) >= 3, took  # the SELECT took a while: the ticks were made while it ran
    victim.close()
    answer = found["answer"]
    assert answer.status_code == 200, answer.text
    assert answer.json()["dataset"] == [[DOCS]]
    assert server.rows("SELECT count(*) AS n FROM docs") == [[DOCS + 1]]
    assert server.rows("SELECT count(*) AS n FROM ticks") == [[len(took)]]

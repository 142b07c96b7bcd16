"""`--memory`: writes past the limit are refused whole by every way in (INSERT, UPDATE, /imp,
/write, COPY) with a 503 that names memory_mb; reads go on; /api/stats shows the use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import requests

from tests.http.conftest import Server, running_server

BIG = 3000  # rows of ~200 bytes of text: past a limit of 1 MB with what is there


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with running_server(tmp_path_factory.mktemp("memory") / "data", "--memory", "1") as running:
        yield running


def _csv(start: int, count: int) -> bytes:
    lines = ["id,s"] + [f"{i},{'c' * 200}" for i in range(start, start + count)]
    return ("\n".join(lines) + "\n").encode()


def _refused(answer: requests.Response) -> None:
    assert answer.status_code == 503, answer.text
    assert "memory_mb" in answer.json()["error"]
    assert "Retry-After" not in answer.headers


def _memory(server: Server) -> dict:
    return server.get("/api/stats", params={"db": "demo"}).json()["databases"]["demo"]["memory"]


def _state(server: Server) -> tuple[list, int]:
    rows = server.rows("SELECT count(*), sum(length(s)) FROM t")
    lsn = server.get("/api/stats", params={"db": "demo"}).json()["databases"]["demo"]
    return rows, lsn["durable_lsn"]


def test_every_way_in_is_refused_whole_past_the_limit(limited: Server) -> None:
    limited.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
    limited.sql("INSERT INTO t VALUES " + ", ".join(f"({i}, 'x')" for i in range(1000)))
    stats = _memory(limited)
    assert stats["limit_bytes"] == 1024 * 1024
    assert 0 < stats["table_bytes"] <= stats["used_bytes"] < stats["limit_bytes"]
    before = _state(limited)

    values = ", ".join(f"({i}, '{'v' * 200}')" for i in range(1000, 1000 + BIG))
    _refused(limited.exec(f"INSERT INTO t VALUES {values}"))
    _refused(limited.exec(f"UPDATE t SET s = '{'u' * 2000}'"))
    _refused(limited.post("/imp", params={"table": "t"}, data=_csv(5000, BIG)))
    _refused(
        limited.post(
            "/exec",
            params={"query": "COPY t FROM STDIN WITH (FORMAT csv, HEADER)"},
            data=_csv(9000, BIG),
            headers={"Content-Type": "text/csv"},
        )
    )
    lines = "\n".join(f't id={i}i,s="{"w" * 200}"' for i in range(20000, 20000 + BIG))
    _refused(limited.post("/write", data=lines.encode()))
    _refused(limited.exec(f"BEGIN; INSERT INTO t VALUES {values}; COMMIT"))

    assert _state(limited) == before  # nothing half applied, nothing logged
    assert _memory(limited) == stats
    assert limited.rows("SELECT count(*) FROM t WHERE id < 10") == [[10]]  # reads go on
    limited.sql("DELETE FROM t WHERE id >= 100")  # shrinking works
    assert _memory(limited)["used_bytes"] < stats["used_bytes"]
    limited.sql("INSERT INTO t VALUES (5000, 'fits again')")

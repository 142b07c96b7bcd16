"""The statement timeout covers parsing, UPDATE and DELETE scans; the SQL text is bounded."""

from __future__ import annotations

from pathlib import Path

import pytest

import refimpl
from refimpl.engine.options import EngineOptions
from refimpl.errors import StatementTimeout, StatementTooLarge


def test_sql_longer_than_max_sql_bytes_is_refused(tmp_path: Path):
    db = refimpl.connect(tmp_path, options=EngineOptions(max_sql_bytes=1000))
    db.execute("CREATE TABLE t (id INT)")
    with pytest.raises(StatementTooLarge, match=r"max_sql_bytes \(1000\)"):
        db.execute("INSERT INTO t VALUES " + ",".join(["(1)"] * 300))
    with pytest.raises(StatementTooLarge, match="max_sql_bytes"):
        db.execute("SELECT 'ऄ" + "ऄ" * 400 + "' AS x")  # 3 bytes a character
    assert db.execute("SELECT count(*) AS n FROM t").rows == [(0,)]


def test_statement_timeout_stops_scans_of_update_and_delete(tmp_path: Path):
    db = refimpl.connect(tmp_path)
    db.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    for start in range(0, 20_000, 1000):
        rows = ",".join(f"({n}, {n})" for n in range(start, start + 1000))
        db.execute(f"INSERT INTO t VALUES {rows}")
    db.close()
    db = refimpl.connect(tmp_path, options=EngineOptions(statement_timeout=0.0))
    for sql in (
        "UPDATE t SET v = v + 1",
        "DELETE FROM t WHERE v >= 0",
        "DELETE FROM t",
        "SELECT count(*) AS n FROM t WHERE v >= 0",
    ):
        with pytest.raises(StatementTimeout, match="statement_timeout_ms"):
            db.execute(sql)
    with pytest.raises(StatementTimeout):
        db.execute("SELECT 1 IN (" + ",".join(str(n) for n in range(3000)) + ") AS x")
    assert db.execute("SELECT v FROM t WHERE id = 19999").rows == [(19999,)]

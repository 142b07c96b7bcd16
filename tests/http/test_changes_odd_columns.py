"""A table whose quoted column names hold a quote or a backslash is read through
/api/changes like any other (spec: changes): its rows under those names, as JSON and as
server-sent events; the encoder's row type refused such names (a ValueError from msgspec)."""

from __future__ import annotations

import json

from tests.http.conftest import Server


def test_columns_named_with_a_quote_or_a_backslash_are_read(server: Server, db: str) -> None:
    server.sql('CREATE TABLE q (id INT PRIMARY KEY, "a""b" STRING, "x\\y" DOUBLE)', db)
    server.sql("INSERT INTO q VALUES (1, 'one', 0.5), (2, NULL, -1.25)", db)
    expected = [{"id": 1, 'a"b': "one", "x\\y": 0.5}, {"id": 2, 'a"b': None, "x\\y": -1.25}]
    params = {"db": db, "table": "q", "wait": "0"}
    answer = server.get("/api/changes", params={**params, "format": "json"})
    assert answer.status_code == 200, answer.text
    rows = [c["row"] for c in answer.json()["changes"] if c["op"] == "upsert"]
    assert rows == expected
    answer = server.get("/api/changes", params={**params, "format": "sse"})
    assert answer.status_code == 200, answer.text
    data = [json.loads(line[6:]) for line in answer.text.split("\n") if line.startswith("data: {")]
    assert [d["row"] for d in data if d.get("op") == "upsert"] == expected

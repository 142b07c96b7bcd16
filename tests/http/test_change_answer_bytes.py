"""The JSON answer of `/api/changes` is made in one encoder call for a page of one step
(CHUNK_ROWS changes or fewer) and a chunk at a time past it: both give the same bytes, the
answer's fields in the spec's order (spec: changes), whatever the page's size."""

from __future__ import annotations

import tempfile

import msgspec

import refimpl
from refimpl.engine.features.change_stream import CHUNK_ROWS, read_runs
from refimpl.http.endpoints import change_encoding
from refimpl.http.endpoints.change_encoding import encode_json_answer, json_array


def test_small_and_chunked_answers_are_the_same_bytes() -> None:
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, at TIMESTAMP, v DOUBLE, s STRING)")
        session = conn.session()
        session.insert_rows(
            "t",
            ["id", "at", "v", "s"],
            [(i, i * 1_000_003, None if i == 3 else i / 4, f"r\n{i}") for i in range(50)],
        )
        session.execute("DELETE FROM t WHERE id < 5")
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        names, kinds = schema.column_names, {c.name: c.type for c in schema.columns}
        page = read_runs(database, "t", schema, 0, CHUNK_ROWS)
        made = encode_json_answer("t", page, names, kinds, 7, 1)
        events = change_encoding._events(page, names, kinds, change_encoding.PLAIN)
        assert len(events) == 1 + 50 + 5  # the CREATE, the rows, the deletes: one step
        chunked = msgspec.json.encode(
            {
                "table": "t",
                "changes": json_array(events),
                "next": page.next_lsn,
                "more": page.more,
                "durable_lsn": 7,
                "oldest_lsn": 1,
            }
        )
        assert made == chunked
        answer = msgspec.json.decode(made)
        assert list(answer) == ["table", "changes", "next", "more", "durable_lsn", "oldest_lsn"]
        assert answer["changes"][4]["row"] == {
            "id": 3,
            "at": "1970-01-01T00:00:03.000009Z",
            "v": None,
            "s": "r\n3",
        }
        assert [c["op"] for c in answer["changes"][-5:]] == ["delete"] * 5

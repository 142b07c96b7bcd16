"""The server-sent events of a change-stream page (`encode_sse`), made a step of up to
CHUNK_ROWS objects at a time, are exactly the events written one by one as the spec says
(spec: changes): `retry` first, a `change` event per change, `id: <lsn>` on each
transaction's last change only, then `position`; over transactions of one change, of
many, of more than a step holds, with deletes and a schema change between them."""

from __future__ import annotations

import tempfile
from typing import Any

import msgspec

import refimpl
from refimpl.engine.features.change_stream import CHUNK_ROWS, ChangeBatch, RunBatch, read_runs
from refimpl.http.endpoints import change_encoding
from refimpl.http.endpoints.change_encoding import RETRY_MS, encode_sse


def _one_by_one(batch: RunBatch | ChangeBatch, names: tuple[str, ...], kinds: dict) -> bytes:
    """The events written a change at a time, the plain way."""
    objects = change_encoding._events(batch, names, kinds, change_encoding.PLAIN)
    lsns = [
        change.lsn for change in (batch.changes() if isinstance(batch, RunBatch) else batch.changes)
    ]
    out = [b"retry: %d\n\n" % RETRY_MS]
    for index, (lsn, made) in enumerate(zip(lsns, objects, strict=True)):
        last = index + 1 == len(lsns) or lsns[index + 1] != lsn
        head = b"id: %d\n" % lsn if last else b""
        out.append(head + b"event: change\ndata: " + msgspec.json.encode(made) + b"\n\n")
    position = msgspec.json.encode({"next": batch.next_lsn, "more": batch.more})
    out.append(b"id: %d\nevent: position\ndata: %s\n\n" % (batch.next_lsn, position))
    return b"".join(out)


def test_steps_write_the_events_one_by_one_would() -> None:
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING)")
        session = conn.session()
        for n in range(5):  # transactions of one change
            session.insert_rows("t", ["id", "s"], [(n, f"one\n{n}")])
        big = CHUNK_ROWS + CHUNK_ROWS // 2  # one transaction over two steps
        session.insert_rows("t", ["id", "s"], [(n, f"r{n}") for n in range(10, 10 + big)])
        session.execute("DELETE FROM t WHERE id < 3")
        conn.execute("ALTER TABLE t ADD COLUMN w DOUBLE")
        for first in range(10_000, 10_000 + 3 * CHUNK_ROWS, 7):  # steps cut transactions
            session.insert_rows("t", ["id", "w"], [(n, n / 2) for n in range(first, first + 7)])
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        names, kinds = schema.column_names, {c.name: c.type for c in schema.columns}
        pages: list[Any] = [read_runs(database, "t", schema, 0, 100_000)]
        pages += [read_runs(database, "t", schema, after, 1) for after in (0, 2, 4, 5, 6)]
        pages.append(read_runs(database, "t", schema, 10**9, 10))  # nothing: no change event
        pages += [page.change_batch() for page in pages[:3]]
        for page in pages:
            assert encode_sse(page, names, kinds) == _one_by_one(page, names, kinds)
        whole = encode_sse(pages[0], names, kinds)
        changes = pages[0].changes()
        assert whole.count(b"event: change\n") == len(changes) > 5 + big + 3 + 3 * CHUNK_ROWS
        assert whole.count(b"\nid: ") == len({change.lsn for change in changes}) + 1
        assert b"\0" not in whole

"""A plain page of the change stream read as it is encoded (`RunPieces`: whole log records a
piece, CHUNK_ROWS changes or more a piece) answers exactly what the page read whole answers
(spec: changes): the same JSON and SSE bytes, the same `next` and `more`, at page sizes
from one row to more than the whole log, over transactions of one change, of more than a
piece holds, deletes and a schema change between them; and pages read on from each `next`
give every change once, in order."""

from __future__ import annotations

import tempfile

import refimpl
from refimpl.engine.features.change_stream import CHUNK_ROWS, RunPieces, read_runs
from refimpl.http.endpoints.change_encoding import encode_json_answer, encode_sse


def test_pieces_answer_as_the_whole_page_does() -> None:
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY, s STRING, at TIMESTAMP)")
        conn.execute("CREATE TABLE other (id INT PRIMARY KEY)")
        session = conn.session()
        for n in range(5):  # transactions of one change
            session.insert_rows("t", ["id", "s", "at"], [(n, f"one\n{n}", n * 1_000_001)])
        big = CHUNK_ROWS + CHUNK_ROWS // 2  # one transaction over more than a piece
        session.insert_rows("t", ["id", "s"], [(n, f"r{n}") for n in range(10, 10 + big)])
        session.insert_rows("other", ["id"], [(n,) for n in range(50)])  # not t's: no change
        session.execute("DELETE FROM t WHERE id < 3")
        conn.execute("ALTER TABLE t ADD COLUMN w DOUBLE")
        for first in range(10_000, 10_000 + 3 * CHUNK_ROWS, 7):
            session.insert_rows("t", ["id", "w"], [(n, n / 2) for n in range(first, first + 7)])
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        names, kinds = schema.column_names, {c.name: c.type for c in schema.columns}
        total = len(read_runs(database, "t", schema, 0, 10**6).changes())
        for page in (1, 7, 100, CHUNK_ROWS, CHUNK_ROWS + 1, 2_500, 10**6):
            position, seen = 0, []
            while True:
                whole = read_runs(database, "t", schema, position, page)
                pieces = RunPieces(database, "t", schema, position, page)
                json = encode_json_answer("t", pieces, names, kinds, lambda next_lsn: next_lsn, 1)
                assert json == encode_json_answer("t", whole, names, kinds, whole.next_lsn, 1)
                assert (pieces.next_lsn, pieces.more) == (whole.next_lsn, whole.more)
                assert pieces.rows == len(whole.changes())
                sse = encode_sse(RunPieces(database, "t", schema, position, page), names, kinds)
                assert sse == encode_sse(whole, names, kinds)
                seen += [(change.lsn, change.seq) for change in whole.changes()]
                if not whole.more:
                    break
                position = whole.next_lsn
            assert len(seen) == len(set(seen)) == total > 5 + big + 3 * CHUNK_ROWS
            assert seen == sorted(seen)


def test_a_reader_that_stops_early_lets_the_log_go() -> None:
    with tempfile.TemporaryDirectory() as folder, refimpl.connect(folder) as conn:
        conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        session = conn.session()
        for first in range(0, 3 * CHUNK_ROWS, 100):
            session.insert_rows("t", ["id"], [(n,) for n in range(first, first + 100)])
        database = conn.instance.database(conn.database)
        schema = database.tables["t"].schema
        pieces = RunPieces(database, "t", schema, 0, 10**6)
        for piece in pieces:
            # The CREATE, then whole transactions of 100 to CHUNK_ROWS changes or more.
            assert sum(len(run.items) for run in piece) == 1 + CHUNK_ROWS
            break
        # Read again from the start, whole: the stopped read held nothing that matters.
        assert len(read_runs(database, "t", schema, 0, 10**6).changes()) == 3 * CHUNK_ROWS + 1

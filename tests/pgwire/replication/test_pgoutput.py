"""pgoutput over a real server: publications choose the tables, psycopg2 reads the
messages (decoded here by PostgreSQL's documented layout), pg_recvlogical streams them."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import (
    current_position,
    read_messages,
    recvlogical,
    replication_cursor,
)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from("!" + fmt, self.data, self.at)
        self.at += struct.calcsize("!" + fmt)
        return value

    def string(self) -> str:
        end = self.data.index(b"\0", self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def tuple(self) -> list[str | None]:
        values: list[str | None] = []
        for _ in range(self.take("h")):
            kind = self.data[self.at : self.at + 1]
            self.at += 1
            if kind == b"n":
                values.append(None)
            else:
                size = self.take("i")
                values.append(self.data[self.at : self.at + size].decode())
                self.at += size
        return values


def decode(message: bytes, relations: dict[int, str]) -> tuple[Any, ...]:
    """One pgoutput message as a tuple: ('B',), ('R', name, ident, columns), ('I', table,
    row), ('U', table, old, new), ('D', table, kind, row), ('T', tables), ('M', prefix,
    text), ('C',)."""
    kind, r = message[:1].decode(), _Reader(message[1:])
    if kind in "BC":
        return (kind,)
    if kind == "R":
        oid, _namespace, name = r.take("i"), r.string(), r.string()
        ident, count = r.take("c").decode(), r.take("h")
        columns = []
        for _ in range(count):
            flags, column, type_oid, _mod = r.take("b"), r.string(), r.take("i"), r.take("i")
            columns.append((column, type_oid, flags))
        relations[oid] = name
        return ("R", name, ident, columns)
    if kind == "I":
        table = relations[r.take("i")]
        assert r.take("c") == b"N"
        return ("I", table, r.tuple())
    if kind == "U":
        table = relations[r.take("i")]
        marker = r.take("c")
        old = None
        if marker in (b"K", b"O"):
            old = r.tuple()
            marker = r.take("c")
        assert marker == b"N"
        return ("U", table, old, r.tuple())
    if kind == "D":
        table = relations[r.take("i")]
        return ("D", table, r.take("c").decode(), r.tuple())
    if kind == "T":
        count, _options = r.take("i"), r.take("b")
        return ("T", [relations[r.take("i")] for _ in range(count)])
    if kind == "M":
        _flags, _lsn, prefix, size = r.take("b"), r.take("q"), r.string(), r.take("i")
        return ("M", prefix, r.data[r.at : r.at + size].decode())
    raise AssertionError(f"unknown message {message!r}")


def test_pgoutput_shows_the_publication_s_tables(pg: PgServer, db: str) -> None:
    for sql in [
        "CREATE TABLE a (id INT PRIMARY KEY, v STRING)",
        "CREATE TABLE b (id INT PRIMARY KEY)",
        "CREATE TABLE f (id INT PRIMARY KEY, v STRING) REPLICA IDENTITY FULL",
        "CREATE PUBLICATION pub FOR TABLE a, f",
    ]:
        pg.http.sql(sql, db=db)
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_po", output_plugin="pgoutput")
    for sql in [
        "INSERT INTO a VALUES (1, 'x')",
        "INSERT INTO b VALUES (1)",  # not published: not sent at all
        "INSERT INTO f VALUES (1, 'old')",
        "UPDATE f SET v = 'new' WHERE id = 1",
        "DELETE FROM a WHERE id = 1",
        "DELETE FROM f WHERE id = 1",
        "ALTER TABLE a ADD COLUMN w DOUBLE",
        "INSERT INTO a VALUES (2, 'y', 2.5)",
        "TRUNCATE TABLE a",
    ]:
        pg.http.sql(sql, db=db)
    cursor.start_replication(
        slot_name="s_po",
        decode=False,
        options={"proto_version": "1", "publication_names": "pub"},
    )
    relations: dict[int, str] = {}
    got = read_messages(cursor, 28)
    messages = [decode(payload, relations) for _, payload in got]
    a_columns = [("id", 23, 1), ("v", 25, 0)]
    f_columns = [("id", 23, 1), ("v", 25, 1)]
    assert messages == [
        ("B",), ("R", "a", "d", a_columns), ("I", "a", ["1", "x"]), ("C",),
        ("B",), ("R", "f", "f", f_columns), ("I", "f", ["1", "old"]), ("C",),
        ("B",), ("U", "f", ["1", "old"], ["1", "new"]), ("C",),
        ("B",), ("D", "a", "K", ["1", None]), ("C",),
        ("B",), ("D", "f", "O", ["1", "new"]), ("C",),
        ("B",), ("M", "kdb.ddl", "ALTER TABLE a ADD COLUMN w DOUBLE"), ("C",),
        ("B",), ("R", "a", "d", [*a_columns, ("w", 701, 0)]), ("I", "a", ["2", "y", "2.5"]),
        ("C",),
        ("B",), ("T", ["a"]), ("C",),
    ]  # fmt: skip
    positions = [at for at, _ in got]
    assert positions == sorted(positions)
    connection.close()


def test_pgoutput_options_are_checked(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE a (id INT PRIMARY KEY)", db=db)
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_opts", output_plugin="pgoutput")
    cases = [
        ({"publication_names": "pub"}, "proto_version option missing"),
        ({"proto_version": "1"}, "publication_names parameter missing"),
        ({"proto_version": "9", "publication_names": "pub"}, "only supports protocol 1 to 4"),
        (
            {"proto_version": "1", "publication_names": "nosuch"},
            'publication "nosuch" does not exist',
        ),
    ]
    for options, message in cases:
        try:
            cursor.start_replication(slot_name="s_opts", decode=False, options=options)
        except psycopg2.Error as error:
            assert message in str(error), (options, str(error))
        else:
            raise AssertionError(f"{options} was taken")
    connection.close()


def test_pg_recvlogical_streams_pgoutput(pg: PgServer, db: str, tmp_path: Path) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db=db)
    pg.http.sql("CREATE PUBLICATION everything FOR ALL TABLES", db=db)
    made = recvlogical(pg, db, "--slot", "s_rl", "--create-slot", "-P", "pgoutput")
    assert made.returncode == 0, made.stderr
    pg.http.sql("INSERT INTO t VALUES (1, 'first'), (2, 'second')", db=db)
    end = current_position(pg, db)
    streamed = recvlogical(
        pg, db, "--slot", "s_rl", "--start", "--endpos", end, "--no-loop",
        "-o", "proto_version=1", "-o", "publication_names=everything", "-f", str(tmp_path / "out"),
    )  # fmt: skip
    assert streamed.returncode == 0, streamed.stderr
    output = (tmp_path / "out").read_bytes()
    assert output.startswith(b"B")
    assert b"public\0t\0" in output and b"first" in output and b"second" in output
    assert recvlogical(pg, db, "--slot", "s_rl", "--drop-slot").returncode == 0


def test_a_run_of_inserts_is_encoded_as_single_inserts_are() -> None:
    from refimpl.engine.features.change_stream import Change
    from refimpl.engine.replication.decoding import Relation, Transaction
    from refimpl.pgwire.replication_plugins import PgOutput

    relation = Relation(
        "t", 16500, ("id", "v", "x", "ok", "at", "n"),
        ("INT", "STRING", "DOUBLE", "BOOLEAN", "TIMESTAMP", "BIGINT"), ("id",), False,
    )  # fmt: skip
    rows = [
        (1, "a'b", 1.5, True, 1_700_000_000_000_000, None),
        (2, None, float("inf"), False, 0, 2**40),
        (3, "ü", 2.0, None, None, -1),
    ]
    changes = [(relation, Change(7, n, 0, "upsert", None, row, None)) for n, row in enumerate(rows)]
    for binary in ("0", "1"):
        options: dict[str, str | None] = {
            "proto_version": "1",
            "publication_names": "p",
            "binary": binary,
        }
        run = PgOutput(options).transaction(Transaction(7, 0, changes), 0)
        one_by_one = PgOutput(options)
        single = [
            message
            for change in changes
            for message in one_by_one.transaction(Transaction(7, 0, [change]), 0)[1:-1]
        ]
        inserts = [payload for _, payload in run if payload[:1] == b"I"]
        assert inserts == [payload for _, payload in single if payload[:1] == b"I"]
        assert [at for at, payload in run if payload[:1] == b"I"] == [
            7 * 4096 + n for n in (1, 2, 3)
        ]


def test_a_run_of_inserts_into_a_table_dropped_since_is_encoded_as_text() -> None:
    """A table dropped after its rows were logged is shown with its columns as text
    (relation_of): a run of its inserts is encoded as its single inserts are, not refused."""
    from refimpl.engine.features.change_stream import Change
    from refimpl.engine.replication.decoding import Relation, Transaction
    from refimpl.pgwire.replication_plugins import PgOutput

    relation = Relation("gone", 16600, ("a", "b"), ("STRING", "STRING"), (), False)
    rows = [(1, "one"), (2, None), (3.5, "three")]
    changes = [(relation, Change(9, n, 0, "upsert", None, row, None)) for n, row in enumerate(rows)]
    options: dict[str, str | None] = {"proto_version": "1", "publication_names": "p"}
    run = PgOutput(options).transaction(Transaction(9, 0, changes), 0)
    one_by_one = PgOutput(options)
    single = [
        payload
        for change in changes
        for _, payload in one_by_one.transaction(Transaction(9, 0, [change]), 0)[1:-1]
        if payload[:1] == b"I"
    ]
    inserts = [payload for _, payload in run if payload[:1] == b"I"]
    assert inserts == single
    assert inserts[0].endswith(b"t\x00\x00\x00\x011t\x00\x00\x00\x03one")
    assert inserts[2].endswith(b"t\x00\x00\x00\x033.5t\x00\x00\x00\x05three")

"""pg_recvlogical, unmodified, against the server: slots made and dropped, test_decoding's
text after a mixed workload equal to what changes() holds for the same LSNs."""

from __future__ import annotations

import msgspec

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import current_position, recvlogical


def _expected(pg: PgServer, db: str, first_lsn: int) -> list[str]:
    """test_decoding's lines as changes('t') tells the same transactions."""
    rows = pg.http.sql(
        f"SELECT lsn, op, key, id, name, ok FROM changes('t', {first_lsn - 1})", db=db
    )
    lines: list[str] = []
    by_lsn: dict[int, list[list]] = {}
    for row in rows["dataset"]:
        by_lsn.setdefault(row[0], []).append(row)
    for lsn in sorted(by_lsn):
        lines.append(f"BEGIN {lsn}")
        for _lsn, op, key, ident, name, ok in by_lsn[lsn]:
            if op == "upsert":
                shown_name = "null" if name is None else "'" + name.replace("'", "''") + "'"
                shown_ok = "null" if ok is None else ("true" if ok else "false")
                lines.append(
                    f"table public.t: INSERT: id[integer]:{ident} name[text]:{shown_name}"
                    f" ok[boolean]:{shown_ok}"
                )
            elif op == "delete":
                _part, identity = msgspec.msgpack.decode(bytes.fromhex(key))
                lines.append(f"table public.t: DELETE: id[integer]:{identity[0]}")
            else:
                lines.append("table public.t: TRUNCATE: (no-flags)")
        lines.append(f"COMMIT {lsn}")
    return lines


def test_test_decoding_output_equals_the_change_stream(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING, ok BOOLEAN)", db=db)
    made = recvlogical(pg, db, "--slot", "s_td", "--create-slot", "-P", "test_decoding")
    assert made.returncode == 0, made.stderr
    first = pg.http.sql("INSERT INTO t VALUES (1, 'a''b', true), (2, NULL, false)", db=db)
    assert first["count"] == 2
    pg.http.sql("UPDATE t SET name = 'z' WHERE id = 2", db=db)
    pg.http.sql("DELETE FROM t WHERE id = 1", db=db)
    pg.http.sql(
        "BEGIN; INSERT INTO t VALUES (3, 'x', NULL); INSERT INTO t VALUES (4, 'y', true); COMMIT",
        db=db,
    )
    pg.http.sql("TRUNCATE TABLE t", db=db)
    end = current_position(pg, db)
    streamed = recvlogical(
        pg, db, "--slot", "s_td", "--start", "--endpos", end, "--no-loop", "-f", "-"
    )
    assert streamed.returncode == 0, streamed.stderr
    lines = streamed.stdout.splitlines()
    first_lsn = int(lines[0].split()[1])
    assert lines == _expected(pg, db, first_lsn)
    assert len([line for line in lines if line.startswith("BEGIN")]) == 5

    # The slot confirmed what it received: a second run from it gets only what follows.
    pg.http.sql("INSERT INTO t VALUES (9, 'late', false)", db=db)
    end = current_position(pg, db)
    again = recvlogical(
        pg,
        db,
        "--slot",
        "s_td",
        "--start",
        "--endpos",
        end,
        "--no-loop",
        "-o",
        "include-xids=0",
        "-f",
        "-",
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        "BEGIN",
        "table public.t: INSERT: id[integer]:9 name[text]:'late' ok[boolean]:false",
        "COMMIT",
    ]
    dropped = recvlogical(pg, db, "--slot", "s_td", "--drop-slot")
    assert dropped.returncode == 0, dropped.stderr
    gone = recvlogical(pg, db, "--slot", "s_td", "--start", "--no-loop", "-f", "-")
    assert gone.returncode != 0
    assert 'replication slot "s_td" does not exist' in gone.stderr


def test_a_slot_name_and_a_plugin_are_checked(pg: PgServer, db: str) -> None:
    bad = recvlogical(pg, db, "--slot", "Bad-Name", "--create-slot", "-P", "test_decoding")
    assert bad.returncode != 0
    assert "contains invalid character" in bad.stderr
    unknown = recvlogical(pg, db, "--slot", "s_plugin", "--create-slot", "-P", "wal2json")
    assert unknown.returncode != 0
    assert 'could not access file "wal2json"' in unknown.stderr
    recvlogical(pg, db, "--slot", "s_twice", "--create-slot", "-P", "test_decoding")
    twice = recvlogical(pg, db, "--slot", "s_twice", "--create-slot", "-P", "test_decoding")
    assert 'replication slot "s_twice" already exists' in twice.stderr
    option = recvlogical(
        pg, db, "--slot", "s_twice", "--start", "--no-loop", "-o", "nonsense=1", "-f", "-"
    )
    assert option.returncode != 0
    assert 'option "nonsense" = "1" is unknown' in option.stderr
    assert recvlogical(pg, db, "--slot", "s_twice", "--drop-slot").returncode == 0

"""A bulk load that merges while other writers commit, through a real server: a
big /imp into a keyed table that has rows, while another client updates (moving rows to
other days), deletes and inserts rows in the same partitions. Afterwards every read (a
scan, point lookups by key, the count) equals the model of the writer's acknowledged
changes and then the import's rows, and after a SIGKILL the recovered database reads the
same."""

from __future__ import annotations

import signal
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

from refimpl.engine.storage.values import format_timestamp
from tests.http.conftest import Server, start_server

DAY = 86_400_000_000
ROWS = 60_000  # the import's: prepared and merged with no lock while the writer goes on
HELD = 3_000  # the table's rows before it, keys 0 .. HELD - 1, which the writer changes
TABLE = (
    "CREATE TABLE k (id BIGINT PRIMARY KEY, ts TIMESTAMP, v BIGINT) TIMESERIES(ts) PARTITION BY DAY"
)


def _at(day: int, n: int) -> int:
    return day * DAY + n


def _iso(micros: int) -> str:
    at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=micros)
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _csv() -> bytes:
    lines = ["id,ts,v"]
    lines += [f"{n},{_iso(_at(n % 4, n))},1" for n in range(HELD, HELD + ROWS)]
    return ("\n".join(lines) + "\n").encode()


def _reads(server: Server, probes: list[int]) -> tuple[list[list], list[list], int]:
    everything = server.rows("SELECT id, ts, v FROM k ORDER BY id")
    listed = ", ".join(map(str, probes))
    found = server.rows(f"SELECT id, ts, v FROM k WHERE id IN ({listed}) ORDER BY id")
    by_key = [server.rows(f"SELECT id, ts, v FROM k WHERE id = {n}") for n in probes[:40]]
    count = server.rows("SELECT count(*) FROM k")[0][0]
    assert [row for rows in by_key for row in rows] == [r for r in found if r[0] in probes[:40]]
    return everything, found, count


def test_a_keyed_import_merges_with_writes_in_its_partitions(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = start_server(data)
    model: dict[int, tuple[int, int]] = {}
    try:
        server.sql(TABLE)
        values = ", ".join(f"({n}, {_at(n % 4, n)}, 0)" for n in range(HELD))
        server.sql(f"INSERT INTO k VALUES {values}")
        model.update({n: (_at(n % 4, n), 0) for n in range(HELD)})
        answers: list[int] = []

        def run_import() -> None:
            response = server.post("/imp", params={"table": "k"}, data=_csv(), timeout=300)
            answers.append(response.status_code)

        importer = threading.Thread(target=run_import)
        importer.start()
        step = 0
        while importer.is_alive() or step < 30:
            n = (step * 37) % HELD
            if step % 3 == 0:  # moved to another day, a new value
                ts, v = _at((n + step) % 5, n), step
                server.sql(f"UPDATE k SET ts = {ts}, v = {v} WHERE id = {n}")
                if n in model:
                    model[n] = (ts, v)
            elif step % 3 == 1:
                server.sql(f"DELETE FROM k WHERE id = {n}")
                model.pop(n, None)
            elif n not in model:  # back (the model is exact: the one other writer)
                server.sql(f"INSERT INTO k VALUES ({n}, {_at(3, n)}, {step})")
                model[n] = (_at(3, n), step)
            step += 1
        importer.join(300)
        assert answers == [200]
        model.update({n: (_at(n % 4, n), 1) for n in range(HELD, HELD + ROWS)})
        expected = [[n, format_timestamp(ts), v] for n, (ts, v) in sorted(model.items())]
        probes = [*range(0, HELD, 97), *range(HELD, HELD + ROWS, 997)]
        seen = _reads(server, probes)
        assert seen[0] == expected
        assert seen[1] == [row for row in expected if row[0] in probes]
        assert seen[2] == len(expected)
    finally:
        if server.process.poll() is None:
            server.stop(signal.SIGKILL)  # no clean close: the log is replayed
    again = start_server(data)
    again.token = server.token
    try:
        assert _reads(again, probes) == seen
    finally:
        again.stop()

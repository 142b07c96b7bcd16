"""/metrics shows each replication slot's lag (durable transactions its client has not
confirmed whole, and their log bytes) and whether a client streams from it."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from tests.pgwire.conftest import PgServer
from tests.pgwire.replication.conftest import replication_cursor


def _slot_values(pg: PgServer, family: str, slot: str) -> float | None:
    text = pg.http.get("/metrics").text
    for found in text_string_to_metric_families(text):
        if found.name == family:
            for sample in found.samples:
                if sample.labels["slot"] == slot:
                    return float(sample.value)
    return None


def test_slot_lag_and_activity(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db=db)
    connection, cursor = replication_cursor(pg, db)
    cursor.create_replication_slot("s_lag", output_plugin="test_decoding")
    assert _slot_values(pg, "kdb_replication_slot_lag_lsns", "s_lag") == 0
    assert _slot_values(pg, "kdb_replication_slot_lag_bytes", "s_lag") == 0
    sizes: list[float] = []
    for n in range(3):
        pg.http.sql(f"INSERT INTO t VALUES ({n}, '{'x' * 10_000 * n}')", db=db)
        sizes.append(_slot_values(pg, "kdb_replication_slot_lag_bytes", "s_lag") or 0)
    assert _slot_values(pg, "kdb_replication_slot_lag_lsns", "s_lag") == 3
    # Each transaction adds its record: the second's 10,000 bytes more, the third's 20,000.
    assert 0 < sizes[0] < 1_000
    assert 10_000 <= sizes[1] - sizes[0] < 11_000
    assert 20_000 <= sizes[2] - sizes[1] < 21_000
    assert _slot_values(pg, "kdb_replication_slot_active", "s_lag") == 0
    cursor.start_replication(slot_name="s_lag", decode=True)
    last = 0
    commits = 0
    ends: list[int] = []
    deadline = time.monotonic() + 10
    while commits < 3 and time.monotonic() < deadline:
        message = cursor.read_message()
        if message is None:
            time.sleep(0.01)
            continue
        last = message.data_start
        if message.payload.startswith("COMMIT"):
            commits += 1
            ends.append(last)
    assert commits == 3
    assert _slot_values(pg, "kdb_replication_slot_active", "s_lag") == 1
    # The first transaction confirmed: the bytes left are exactly the other two's.
    cursor.send_feedback(flush_lsn=ends[0], force=True)
    for _ in range(100):
        if _slot_values(pg, "kdb_replication_slot_lag_lsns", "s_lag") == 2:
            break
        time.sleep(0.05)
    assert _slot_values(pg, "kdb_replication_slot_lag_bytes", "s_lag") == sizes[2] - sizes[0]
    cursor.send_feedback(flush_lsn=last, force=True)
    for _ in range(100):
        if _slot_values(pg, "kdb_replication_slot_lag_lsns", "s_lag") == 0:
            break
        time.sleep(0.05)
    assert _slot_values(pg, "kdb_replication_slot_lag_lsns", "s_lag") == 0
    assert _slot_values(pg, "kdb_replication_slot_lag_bytes", "s_lag") == 0
    connection.close()

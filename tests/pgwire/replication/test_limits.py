"""pg_max_wal_senders and pg_max_replication_slots, from kdb.conf: PostgreSQL's refusals
over them (53300 at the login, 53400 for a slot), and a place freed is taken again."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg2
import psycopg2.extras
import pytest

from tests.pgwire.attack import pg_server
from tests.pgwire.conftest import PgServer


def _connect(pg: PgServer) -> psycopg2.extensions.connection:
    return psycopg2.connect(
        host=pg.host,
        port=pg.port,
        user="admin",
        password=pg.token,
        dbname="demo",
        connection_factory=psycopg2.extras.LogicalReplicationConnection,
    )


def test_wal_senders_and_slots_are_limited(tmp_path: Path) -> None:
    with pg_server(tmp_path, pg_max_wal_senders=1, pg_max_replication_slots=1) as pg:
        first = _connect(pg)
        with pytest.raises(psycopg2.OperationalError) as refused:
            _connect(pg)
        assert "exceeds max_wal_senders (currently 1)" in str(refused.value)
        assert "pg_max_wal_senders" in str(refused.value)
        cursor = first.cursor()
        cursor.execute("CREATE_REPLICATION_SLOT s1 LOGICAL test_decoding")
        with pytest.raises(psycopg2.Error) as full:
            cursor.execute("CREATE_REPLICATION_SLOT s2 LOGICAL test_decoding")
        assert full.value.pgcode == "53400"
        assert "pg_max_replication_slots (now 1)" in str(full.value)
        # A slot made over SQL counts against the same limit.
        refused_sql = pg.http.exec(
            "SELECT * FROM pg_create_logical_replication_slot('s3', 'test_decoding')"
        )
        assert refused_sql.status_code == 400
        assert "pg_max_replication_slots (now 1)" in refused_sql.json()["error"]
        cursor.execute("DROP_REPLICATION_SLOT s1")
        cursor.execute("CREATE_REPLICATION_SLOT s2 TEMPORARY LOGICAL test_decoding")
        first.close()
        # The place is free again once the server has seen the connection close.
        deadline = time.monotonic() + 5
        while True:
            try:
                _connect(pg).close()
                break
            except psycopg2.OperationalError:
                assert time.monotonic() < deadline, "the wal sender place was never freed"
                time.sleep(0.05)
        # Plain connections are not wal senders: the limit does not touch them.
        plain = psycopg2.connect(
            host=pg.host, port=pg.port, user="admin", password=pg.token, dbname="demo"
        )
        plain.close()

"""`pg_port` and `pg_max_connections`: off unless set, from kdb.conf, KDB_ and flags."""

from __future__ import annotations

import pytest

from refimpl.errors import ConfigError
from refimpl.settings import load_settings


def test_the_protocol_is_off_unless_a_port_is_given(tmp_path):
    assert load_settings({"data": tmp_path}, environ={}).pg_port is None
    (tmp_path / "kdb.conf").write_text("pg_port = 5433\npg_max_connections = 7\n")
    from_file = load_settings({"data": tmp_path}, environ={})
    assert (from_file.pg_port, from_file.pg_max_connections) == (5433, 7)
    from_env = load_settings({"data": tmp_path}, environ={"KDB_PG_PORT": "0"})
    assert from_env.pg_port == 0
    assert load_settings({"data": tmp_path, "pg_port": 6000}, environ={}).pg_port == 6000


def test_a_bad_port_names_the_setting(tmp_path):
    with pytest.raises(ConfigError, match="'pg_port' from KDB_PG_PORT"):
        load_settings({"data": tmp_path}, environ={"KDB_PG_PORT": "70000"})

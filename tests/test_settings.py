"""Settings: kdb.conf < KDB_<KEY> environment < flags; unknown keys and bad values stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from refimpl.errors import ConfigError
from refimpl.settings import (
    KEYS,
    Settings,
    engine_options,
    load_settings,
    load_settings_and_sources,
    parse_config,
)


def test_defaults(tmp_path):
    settings = load_settings({"data": tmp_path}, environ={})
    assert settings == Settings(data=tmp_path)
    assert (settings.host, settings.port, settings.threads) == ("127.0.0.1", 9000, 16)
    assert (settings.wal_archive_mb, settings.max_body_mb, settings.segment_mb) == (1024, 64, 64)
    assert settings.statement_timeout_ms == 30000 and settings.checkpoint_mb == 8
    assert settings.fsync_delay_ms == 0 and settings.dev is False and settings.static is None
    assert load_settings(environ={}).data == Path("kdb-data")


def test_order_of_strength(tmp_path):
    (tmp_path / "kdb.conf").write_text(
        "# comment\n\nport = 9100\nthreads = 4  # trailing comment\nhost = 0.0.0.0\n"
    )
    settings = load_settings({"data": tmp_path}, environ={"KDB_PORT": "9200"})
    assert (settings.port, settings.threads, settings.host) == (9200, 4, "0.0.0.0")
    settings = load_settings({"data": tmp_path, "port": 9300}, environ={"KDB_PORT": "9200"})
    assert settings.port == 9300


def test_data_from_environment_finds_its_config(tmp_path):
    (tmp_path / "kdb.conf").write_text("threads = 3\n")
    assert load_settings(environ={"KDB_DATA": str(tmp_path)}).threads == 3


def test_explicit_config_file(tmp_path):
    conf = tmp_path / "other.conf"
    conf.write_text("dev = yes\nmax_body_mb = 1\n")
    settings = load_settings({"data": tmp_path / "d"}, environ={}, config=conf)
    assert settings.dev is True and settings.max_body_bytes == 1024 * 1024
    with pytest.raises(ConfigError, match="cannot read"):
        load_settings({}, environ={}, config=tmp_path / "missing.conf")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("colour = blue\n", "line 1: unknown setting 'colour'"),
        ("\nport 9000\n", "line 2: write `key = value`"),
        ("port = ninety\n", "setting 'port' .* must be a whole number"),
        ("port = 70000\n", "from 0 to 65535"),
        ("threads = 0\n", "setting 'threads'"),
        ("dev = maybe\n", "setting 'dev' .* true or false"),
        ("fsync_delay_ms = nan\n", "fsync_delay_ms"),
        ("host = \n", "setting 'host'"),
        ("segment_mb = 512\n", "segment_mb.*at most wal_archive_mb / 4"),
        ("stream_compression = gzip\n", "setting 'stream_compression' .* off or deflate"),
    ],
)
def test_bad_config_stops_the_start(tmp_path, text, pattern):
    (tmp_path / "kdb.conf").write_text(text)
    with pytest.raises(ConfigError, match=pattern):
        load_settings({"data": tmp_path}, environ={})


def test_unknown_and_bad_environment(tmp_path):
    with pytest.raises(ConfigError, match="KDB_COLOUR"):
        load_settings({"data": tmp_path}, environ={"KDB_COLOUR": "x"})
    with pytest.raises(ConfigError, match="KDB_THREADS"):
        load_settings({"data": tmp_path}, environ={"KDB_THREADS": "-1"})
    assert load_settings({"data": tmp_path}, environ={"KDB_DEV": "on"}).dev is True


def test_unknown_flag():
    with pytest.raises(ConfigError, match="unknown setting 'colour'"):
        load_settings({"colour": "x"}, environ={})


def test_segment_follows_a_small_archive(tmp_path):
    settings = load_settings({"data": tmp_path}, environ={"KDB_WAL_ARCHIVE_MB": "100"})
    assert settings.segment_mb == 25
    assert load_settings({"data": tmp_path}, environ={"KDB_WAL_ARCHIVE_MB": "4"}).segment_mb == 1


def test_parse_config_keeps_equals_in_values():
    assert parse_config("static = /a=b\n") == {"static": "/a=b"}


def test_engine_options_in_engine_units(tmp_path):
    settings = load_settings(
        {"data": tmp_path},
        environ={"KDB_STATEMENT_TIMEOUT_MS": "1500", "KDB_FSYNC_DELAY_MS": "0.5"},
    )
    options = engine_options(settings)
    assert options.statement_timeout == 1.5 and options.fsync_delay == 0.0005
    assert options.wal_archive_bytes == 1024 * 1024 * 1024
    assert options.segment_bytes == 64 * 1024 * 1024
    assert options.checkpoint_bytes == 8 * 1024 * 1024


def test_sources_say_where_each_value_came_from(tmp_path):
    (tmp_path / "kdb.conf").write_text("threads = 4\nwal_archive_mb = 8\n")
    settings, sources = load_settings_and_sources(
        {"data": tmp_path, "port": None, "dev": True}, environ={"KDB_THREADS": "5"}
    )
    assert (settings.threads, settings.segment_mb, settings.dev) == (5, 2, True)
    assert sources["threads"] == "KDB_THREADS"
    assert sources["wal_archive_mb"] == str(tmp_path / "kdb.conf")
    assert sources["segment_mb"] == "default (at most wal_archive_mb / 4)"
    assert sources["dev"] == "--dev" and sources["data"] == "--data"
    assert sources["port"] == "default"  # None: not given
    assert set(sources) == set(KEYS)


def test_an_unknown_key_names_the_closest_known_one(tmp_path):
    with pytest.raises(
        ConfigError, match=r"unknown setting 'max_body_bm'; did you mean 'max_body_mb'\?"
    ):
        load_settings({"data": tmp_path, "max_body_bm": 3}, environ={})
    with pytest.raises(ConfigError, match=r"did you mean KDB_PG_PORT\?"):
        load_settings({"data": tmp_path}, environ={"KDB_PGPORT": "5432"})
    with pytest.raises(
        ConfigError, match=r"line 1: unknown setting 'log_fromat'; did you mean 'log_format'\?"
    ):
        parse_config("log_fromat = json\n")


def test_every_setting_has_its_row_in_the_settings_table():
    # `refimpl serve --help` describes each setting from the table of Settings' docstring.
    from refimpl.commands.settings_view import meanings

    described = meanings()
    assert [key for key in KEYS if key not in described or not described[key][1]] == []

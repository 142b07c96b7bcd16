"""`refimpl serve --help` and `refimpl settings`, run as a person runs them."""

from __future__ import annotations

import re
from pathlib import Path

from refimpl.settings import KEYS
from tests.http.conftest import run_refimpl


def test_serve_help_names_each_flags_setting_and_variable_and_lists_every_setting() -> None:
    done = run_refimpl("serve", "--help")
    assert done.returncode == 0, done
    # argparse wraps the help at any space; the usage line above names the flags too
    text = " ".join(done.stdout.split("options:", 1)[1].split())
    for flag, key in [
        ("--port PORT", "port"),
        ("--pg-port PORT", "pg_port"),
        ("--memory MB", "memory_mb"),
        ("--dev", "dev"),
        ("--log-format", "log_format"),
    ]:
        described = re.search(
            re.escape(flag) + r" .*?\(default [^;]*; kdb.conf (\w+), (KDB_\w+)\)", text
        )
        assert described, (flag, text)
        assert described.groups() == (key, "KDB_" + key.upper())
    listing = done.stdout.split("Every setting", 1)[1]
    for key in KEYS:  # those without a flag too
        assert re.search(rf"(?m)^  {key} +KDB_{key.upper()} +\S", listing), key


def test_settings_shows_each_value_and_where_it_came_from(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "kdb.conf").write_text("threads = 4\nport = 9100\nstream_capacity = 7\n")
    done = run_refimpl(
        "settings",
        "--data",
        str(data),
        "--port",
        "9300",
        env={"KDB_STREAM_CAPACITY": "9", "KDB_MEMORY_MB": "128"},
    )
    assert done.returncode == 0, done
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()}
    assert set(rows) == {"setting", *KEYS}
    assert rows["threads"] == ["threads", "4", str(data / "kdb.conf")]
    assert rows["port"] == ["port", "9300", "--port"]  # the flag beats kdb.conf
    assert rows["stream_capacity"] == ["stream_capacity", "9", "KDB_STREAM_CAPACITY"]
    assert rows["memory_mb"] == ["memory_mb", "128", "KDB_MEMORY_MB"]
    assert rows["data"] == ["data", str(data), "--data"]
    assert rows["host"] == ["host", "127.0.0.1", "default"]
    assert rows["dev"] == ["dev", "false", "default"]
    assert not (data / "admin.token").exists()  # it only reads


def test_a_flag_whose_name_is_not_its_key_is_named_by_its_flag(tmp_path: Path) -> None:
    done = run_refimpl("settings", "--data", str(tmp_path), "--memory", "64")
    assert done.returncode == 0, done
    row = next(line for line in done.stdout.splitlines() if line.startswith("memory_mb "))
    assert row.split() == ["memory_mb", "64", "--memory"]


def test_an_unknown_key_in_kdb_conf_names_the_closest_one(tmp_path: Path) -> None:
    (tmp_path / "kdb.conf").write_text("# tuned\nthread = 4\n")
    for command in ("settings", "serve"):
        done = run_refimpl(command, "--data", str(tmp_path), "--port", "0")
        assert done.returncode == 2, done
        assert "line 2: unknown setting 'thread'; did you mean 'threads'?" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kdb.conf"]  # nothing created


def test_an_unknown_kdb_variable_names_the_closest_one_and_serve_refuses(tmp_path: Path) -> None:
    data = tmp_path / "data"
    for command in ("settings", "serve"):
        done = run_refimpl(
            command, "--data", str(data), "--port", "0", env={"KDB_STATMENT_TIMEOUT_MS": "5"}
        )
        assert done.returncode == 2, done
        assert (
            "unknown environment setting KDB_STATMENT_TIMEOUT_MS;"
            " did you mean KDB_STATEMENT_TIMEOUT_MS?"
        ) in done.stderr
    assert not data.exists()


def test_a_name_like_no_setting_points_to_the_list(tmp_path: Path) -> None:
    (tmp_path / "kdb.conf").write_text("zzqx = 1\n")
    done = run_refimpl("settings", "--data", str(tmp_path))
    assert done.returncode == 2, done
    assert "unknown setting 'zzqx' (`refimpl settings` lists them all)" in done.stderr


def test_a_bad_value_is_refused_with_its_source(tmp_path: Path) -> None:
    done = run_refimpl("settings", "--data", str(tmp_path), env={"KDB_THREADS": "many"})
    assert done.returncode == 2, done
    assert "setting 'threads' from KDB_THREADS must be a whole number" in done.stderr


def test_a_mistyped_flag_names_the_closest_flag(tmp_path: Path) -> None:
    for command in ("serve", "settings"):
        done = run_refimpl(command, "--data", str(tmp_path / "d"), "--treads", "4")
        assert done.returncode == 2, done
        assert "unrecognized arguments: --treads 4; did you mean --threads?" in done.stderr
    assert not (tmp_path / "d").exists()


def test_a_flag_for_a_setting_without_one_says_where_to_set_it(tmp_path: Path) -> None:
    done = run_refimpl("settings", "--data", str(tmp_path), "--max-body-mb=3")
    assert done.returncode == 2, done
    assert (
        "the setting max_body_mb has no flag: set it in kdb.conf (max_body_mb = ...)"
        " or as KDB_MAX_BODY_MB"
    ) in done.stderr


def test_settings_refuses_what_serve_would_refuse(tmp_path: Path) -> None:
    done = run_refimpl("settings", "--data", str(tmp_path), "--dev", "--host", "0.0.0.0")
    assert done.returncode == 2, done
    assert "may only listen on a loopback address, not 0.0.0.0" in done.stderr
    done = run_refimpl("settings", "--data", str(tmp_path), "--static", str(tmp_path))
    assert done.returncode == 2, done
    assert "the data folder" in done.stderr

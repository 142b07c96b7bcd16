"""`refimpl sql --pg HOST:PORT`: the shell on a server's PostgreSQL port (over TLS, which this
server serves), where a transaction is the server's own; and the token kept out of the
command line (`REFIMPL_TOKEN`, `--token-file`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.http.conftest import ROOT, Server
from tests.pgwire.conftest import PgServer, tls_pg_server
from tests.shell.conftest import quit_shell, shell_environment, spawn, type_line


@pytest.fixture(scope="module")
def pg_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with tls_pg_server(tmp_path_factory.mktemp("shell-pg")) as running:
        yield running


def count(server: Server, table: str) -> int:
    answer = server.request("POST", "/exec", data=f"SELECT count(*) AS n FROM {table}")
    assert answer.status_code == 200, answer.text
    return int(answer.json()["dataset"][0][0])


def test_a_transaction_on_the_pg_port_is_the_servers(tmp_path: Path, pg_tls: PgServer) -> None:
    child = spawn(tmp_path, "--pg", f"{pg_tls.host}:{pg_tls.port}", "--token", pg_tls.token)
    assert "PostgreSQL protocol, TLS" in (child.before or "")  # the greeting says how it connects
    # Several statements on a line: each one's answer in turn.
    type_line(child, "CREATE TABLE p (id INT PRIMARY KEY); INSERT INTO p VALUES (1), (2), (3);")
    child.expect("CREATE TABLE")
    child.expect("INSERT 0 3")
    type_line(child, "BEGIN;")
    child.expect(r"demo=\*>")
    type_line(child, "DELETE FROM p;")
    child.expect("DELETE 3")
    assert count(pg_tls.http, "p") == 3  # the server's open transaction: no one else sees it
    type_line(child, "ROLLBACK;")
    child.expect("ROLLBACK")
    child.expect("demo=>")
    assert count(pg_tls.http, "p") == 3

    type_line(child, "BEGIN;")
    type_line(child, "INSERT INTO p VALUES (4);")
    child.expect("INSERT 0 1")
    type_line(child, "COMMIT;")
    child.expect("COMMIT")
    child.expect("demo=>")
    assert count(pg_tls.http, "p") == 4

    type_line(child, "SELECT nope FROM p;")
    child.expect(r"ERROR: column 'nope' does not exist \(SQLSTATE 42703\)")
    quit_shell(child)


def test_without_psycopg_pg_says_how_to_install_it(tmp_path: Path, pg_tls: PgServer) -> None:
    # A psycopg that cannot be imported, as where the pg extra is not installed.
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "psycopg.py").write_text("raise ImportError('psycopg is not installed')\n")
    env = shell_environment(tmp_path)
    env["PYTHONPATH"] = f"{stub}:{ROOT}"
    address = f"{pg_tls.host}:{pg_tls.port}"
    ran = subprocess.run(
        [sys.executable, "-m", "refimpl", "sql", "--pg", address, "-c", "SELECT 1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 2
    assert ran.stderr.splitlines() == [
        "refimpl sql: --pg needs psycopg, which is not installed; install it with:"
        " pip install 'refimpl[pg]'"
    ]


def run_sql(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "refimpl", "sql", *args],
        env={**shell_environment(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_token_from_the_environment_or_a_file(tmp_path: Path, pg_tls: PgServer) -> None:
    url = pg_tls.http.url
    from_env = run_sql(tmp_path, "--url", url, "-c", "SELECT 1 AS one", REFIMPL_TOKEN=pg_tls.token)
    assert from_env.returncode == 0 and "(1 row)" in from_env.stdout, from_env
    token_file = tmp_path / "token"
    token_file.write_text(pg_tls.token + "\n")
    from_file = run_sql(tmp_path, "--url", url, "--token-file", str(token_file), "-c", "SELECT 1")
    assert from_file.returncode == 0 and "(1 row)" in from_file.stdout, from_file
    # The same over the PostgreSQL port, typed: the token is nowhere on the command line.
    child = spawn(tmp_path, "--pg", f"{pg_tls.host}:{pg_tls.port}", "--token-file", str(token_file))
    type_line(child, "SELECT 41 + 1 AS answer;")
    child.expect(r"\s42\r\n\(1 row\)")
    quit_shell(child)

    no_token = run_sql(tmp_path, "--url", url, "-c", "SELECT 1")
    assert no_token.returncode == 1 and "token" in no_token.stderr
    token_file.write_text("")
    empty = run_sql(tmp_path, "--url", url, "--token-file", str(token_file), "-c", "SELECT 1")
    assert empty.returncode == 2
    assert (
        empty.stderr.strip()
        == f"refimpl sql: --token-file {token_file} is empty; put the token in it"
    )

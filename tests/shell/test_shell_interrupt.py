"""Ctrl-C while a statement runs: over the PostgreSQL port the shell sends a cancel and the
statement stops; over HTTP the request is abandoned; either way one line says so and the
prompt comes back, with no traceback, as psql does."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest

from tests.pgwire.attack import pg_server
from tests.pgwire.conftest import PgServer
from tests.shell.conftest import (
    TIMEOUT,
    quit_shell,
    shell_environment,
    spawn,
    type_line,
    wait_until_running,
)

# Three copies of 400 rows joined with no condition: 64 million rows to count, far longer
# than the test waits (the statement timeout ends what an abandoned request leaves running).
LONG = "SELECT count(*) FROM big a, big b, big c WHERE a.id + b.id + c.id >= 0;"


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with pg_server(tmp_path_factory.mktemp("shell-interrupt"), statement_timeout_ms=8_000) as pg:
        pg.http.sql("CREATE TABLE big (id INT PRIMARY KEY)")
        values = ", ".join(f"({n})" for n in range(400))
        pg.http.sql(f"INSERT INTO big VALUES {values}")
        yield pg


def _interrupt(child: pexpect.spawn, statement: str) -> tuple[float, str]:
    """Type `statement`, press Ctrl-C once it runs: seconds from Ctrl-C to the one-line
    message, and the message."""
    type_line(child, statement)
    wait_until_running(child)
    time.sleep(1.0)  # it runs: the answer is many seconds away
    pressed = time.monotonic()
    child.sendintr()
    child.expect(r"(Cancel request sent|Abandoned)[^\r\n\x1b]*")
    return time.monotonic() - pressed, str(child.after)


def test_ctrl_c_over_the_pg_port_cancels_the_statement(tmp_path: Path, pg: PgServer) -> None:
    child = spawn(tmp_path, "--pg", f"{pg.host}:{pg.port}", "--token", pg.token)
    seconds, said = _interrupt(child, LONG)
    assert seconds < 10 and said == "Cancel request sent: the statement was canceled."
    child.expect("demo=>")
    type_line(child, "SELECT count(*) AS n FROM big;")
    child.expect("400")
    child.expect("demo=>")

    # Inside a transaction the canceled statement fails it, as on PostgreSQL.
    type_line(child, "BEGIN;")
    child.expect(r"demo=\*>")
    type_line(child, "INSERT INTO big VALUES (1000);")
    child.expect("INSERT 0 1")
    assert "ROLLBACK the transaction" in _interrupt(child, LONG)[1]
    type_line(child, "ROLLBACK;")
    child.expect("ROLLBACK")
    child.expect("demo=>")
    assert pg.http.rows("SELECT count(*) FROM big") == [[400]]
    assert "Traceback" not in (child.before or "")
    quit_shell(child)


def test_ctrl_c_over_http_abandons_the_request(tmp_path: Path, pg: PgServer) -> None:
    child = spawn(tmp_path, "--url", pg.http.url, "--token", pg.token)
    seconds, said = _interrupt(child, LONG)
    assert seconds < 5
    assert said.startswith("Abandoned the request: over HTTP no cancel reaches the server")
    child.expect("demo=>")
    type_line(child, "SELECT count(*) AS n FROM big;")
    child.expect("400")
    child.expect("demo=>")

    # Inside a held transaction: the statement is not part of it, what was held stays.
    type_line(child, "BEGIN;")
    child.expect(r"demo=\*>")
    type_line(child, "INSERT INTO big VALUES (1001);")
    child.expect(r"1 row\(s\) inserted")
    said = _interrupt(child, LONG)[1]
    assert said.startswith("Abandoned the statement: it is not part of the open")
    child.expect(r"demo=\*>")
    type_line(child, "COMMIT;")
    child.expect(r"demo=>")
    assert pg.http.rows("SELECT count(*) FROM big WHERE id = 1001") == [[1]]
    assert "Traceback" not in (child.before or "")
    quit_shell(child)


def test_ctrl_c_on_a_data_folder_stops_the_statement(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--data", str(tmp_path / "data"))
    values = ", ".join(f"({n})" for n in range(400))
    type_line(child, f"CREATE TABLE big (id INT PRIMARY KEY); INSERT INTO big VALUES {values};")
    child.expect(r"400 row\(s\) inserted")
    type_line(child, "BEGIN;")
    type_line(child, "INSERT INTO big VALUES (1000);")
    child.expect(r"demo=\*>")
    type_line(child, LONG)
    wait_until_running(child)
    time.sleep(1.0)
    child.sendintr()
    child.expect("Interrupted: the statement was stopped; the open transaction is rolled back.")
    child.expect("demo=>")
    type_line(child, "SELECT count(*) AS n FROM big;")
    child.expect("400")
    assert "Traceback" not in (child.before or "")
    quit_shell(child)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_ctrl_c_works_when_the_parent_ignored_sigint(tmp_path: Path) -> None:
    """A program that ignores SIGINT passes that on to what it starts (pytest's workers do):
    the shell sets its own handling, as psql does, so Ctrl-C still stops the statement."""
    child = pexpect.spawn(
        sys.executable,
        ["-m", "refimpl", "sql", "--data", str(tmp_path / "data")],
        env=shell_environment(tmp_path),
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=TIMEOUT,
        dimensions=(50, 200),
        preexec_fn=_ignore_sigint,
    )
    child.expect("demo=>")
    values = ", ".join(f"({n})" for n in range(400))
    type_line(child, f"CREATE TABLE big (id INT PRIMARY KEY); INSERT INTO big VALUES {values};")
    child.expect(r"400 row\(s\) inserted")
    child.expect("demo=>")
    type_line(child, LONG)
    wait_until_running(child)
    time.sleep(1.0)
    child.sendintr()
    child.expect("Interrupted: the statement was stopped.")
    child.expect("demo=>")
    quit_shell(child)

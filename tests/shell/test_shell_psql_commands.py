"""psql's everyday commands in `refimpl sql`, typed (\\dt, \\du, \\l, \\c, \\x, \\i, the pager)
and as a script (`-f FILE`)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.http.conftest import Server
from tests.shell.conftest import quit_shell, shell_environment, spawn, type_line


def test_catalog_databases_and_expanded_rows(tmp_path: Path, server: Server) -> None:
    child = spawn(tmp_path, "--url", server.url, "--token", server.token)
    type_line(child, "CREATE TABLE listed (id INT PRIMARY KEY, name STRING);")
    type_line(child, "CREATE USER carol; CREATE DATABASE elsewhere;")
    child.expect("database 'elsewhere' created")
    type_line(child, "\\dt")
    child.expect("listed")
    type_line(child, "\\du")
    child.expect("carol")
    type_line(child, "\\l")
    child.expect("elsewhere")
    child.expect("demo=>")

    type_line(child, "\\c elsewhere")
    child.expect('You are now connected to database "elsewhere".')
    child.expect("elsewhere=>")
    type_line(child, "\\dt")
    child.expect(r"\(0 rows\)")  # the tables of the database now in use
    type_line(child, "\\c nowhere")
    child.expect("ERROR: .*nowhere")
    child.expect("elsewhere=>")  # still where it was
    type_line(child, "\\c demo")
    child.expect("demo=>")

    type_line(child, "INSERT INTO listed VALUES (1, 'one'), (2, NULL);")
    type_line(child, "\\x")
    child.expect("Expanded display is on.")
    type_line(child, "SELECT id, name FROM listed ORDER BY id;")
    child.expect(r"-\[ RECORD 1 \]\r\nid   \| 1\r\nname \| one\r\n-\[ RECORD 2 \]")
    type_line(child, "\\x off")
    child.expect("Expanded display is off.")
    type_line(child, "\\x sideways")
    child.expect("\\\\x takes on or off, not 'sideways'")
    type_line(child, "\\?")
    child.expect(r"\\pset pager")
    quit_shell(child)


def test_a_file_runs_with_i_and_f(tmp_path: Path) -> None:
    script = tmp_path / "make.sql"
    script.write_text(
        "CREATE TABLE s (id INT PRIMARY KEY);\n"
        "INSERT INTO s VALUES (1),\n  (2);\n"
        "\\dt\n"
        "SELECT count(*) AS made FROM s; -- a comment; not a statement\n"
    )
    child = spawn(tmp_path, "--data", str(tmp_path / "data"))
    type_line(child, f"\\i {script}")
    child.expect("table 's' created")
    child.expect(r"2 row\(s\) inserted")
    child.expect(r"s\s+table")  # \dt, between the statements
    child.expect(r"made")
    child.expect(r"\s2\r\n\(1 row\)")
    type_line(child, "\\i no-such-file.sql")
    child.expect("\\\\i no-such-file.sql: No such file or directory")
    quit_shell(child)

    # -f: the same file as a script, then one that fails half way: exit status 1, and
    # nothing after the error runs.
    failing = tmp_path / "fail.sql"
    failing.write_text(
        "INSERT INTO s VALUES (3);\nINSERT INTO s VALUES (1);\nINSERT INTO s VALUES (4);\n"
    )
    env = shell_environment(tmp_path)
    base = [sys.executable, "-m", "refimpl", "sql", "--data", str(tmp_path / "data")]
    ran = subprocess.run([*base, "-f", str(failing)], env=env, capture_output=True, text=True)
    assert ran.returncode == 1
    assert ran.stdout == "1 row(s) inserted\n"
    assert ran.stderr.splitlines() == [
        "ERROR: duplicate primary key 1 in table 's'; nothing of the statement was applied",
        "(the statement at line 2: INSERT INTO s VALUES (1))",
    ]
    counted = subprocess.run(
        [*base, "--format", "csv", "-c", "SELECT id FROM s ORDER BY id"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert counted.stdout.split() == ["id", "1", "2", "3"]
    missing = subprocess.run([*base, "-f", "nope.sql"], env=env, capture_output=True, text=True)
    assert missing.returncode == 1 and "nope.sql" in missing.stderr


def test_answers_taller_than_the_terminal_go_to_the_pager(tmp_path: Path) -> None:
    # A pager that marks each line it shows; the terminal is 50 lines tall.
    child = spawn(tmp_path, "--data", str(tmp_path / "data"), PAGER="sed 's/^/paged:/'")
    type_line(child, "SELECT * FROM generate_series(1, 100);")
    child.expect(r"paged:\s+100\r\npaged:\(100 rows\)")
    type_line(child, "SELECT * FROM generate_series(1, 3);")  # fits: no pager
    child.expect(r"\n\s+3\r\n\(3 rows\)")
    type_line(child, "\\pset pager off")
    child.expect("Pager usage is off.")
    type_line(child, "SELECT generate_series + 1000 AS m FROM generate_series(1, 100);")
    child.expect(r"\n1100\r\n\(100 rows\)")
    assert "paged:" not in (child.before or "")
    quit_shell(child)

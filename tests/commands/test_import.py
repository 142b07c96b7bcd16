"""`refimpl import`: a CSV file into a table, streamed through /imp, on a server or a folder."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pexpect
import pytest

from refimpl.commands.importing import BLOCK, import_to_server
from refimpl.engine.progress import Progress
from tests.http.conftest import ROOT, Server, db, run_refimpl, running_server

__all__ = ["db"]  # the fixture: a fresh database per test


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("import-server") / "data") as running:
        yield running


def write_csv(path: Path, rows: int) -> Path:
    with path.open("w") as out:
        out.write("id,sym,price\n")
        out.writelines(f"{n},S{n % 7},{n / 4}\n" for n in range(rows))
    return path


def test_import_to_a_server_is_quiet_outside_a_terminal(
    tmp_path: Path, server: Server, db: str
) -> None:
    server.sql("CREATE TABLE q (id INT PRIMARY KEY, sym SYMBOL, price DOUBLE)", db)
    file = write_csv(tmp_path / "q.csv", 3000)
    done = run_refimpl(
        "import",
        str(file),
        "--table",
        "q",
        "--url",
        server.url,
        "--token",
        server.token,
        "--db",
        db,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "3000 row(s) inserted into table 'q'"
    assert done.stderr == ""  # no progress bar when nobody watches
    assert server.rows("SELECT count(*), max(price) FROM q", db) == [[3000, 2999 / 4]]


def test_the_file_is_streamed_in_blocks(tmp_path: Path, server: Server, db: str) -> None:
    server.sql("CREATE TABLE q (id INT PRIMARY KEY, sym SYMBOL, price DOUBLE)", db)
    file = write_csv(tmp_path / "q.csv", 60_000)
    size = file.stat().st_size
    assert size > 3 * BLOCK
    seen: list[Progress] = []
    answer = import_to_server(file, "q", server.url, server.token, db, seen.append)
    assert answer["count"] == 60_000
    done = [p.done for p in seen]
    assert done == sorted(done) and done[-1] == size and seen[-1].total == size
    assert all(b - a <= BLOCK for a, b in zip([0, *done], done, strict=False))
    assert len({d for d in done}) > 3  # read block by block, never whole


def test_a_bad_line_imports_nothing_and_says_why(tmp_path: Path, server: Server, db: str) -> None:
    server.sql("CREATE TABLE q (id INT PRIMARY KEY, sym SYMBOL, price DOUBLE)", db)
    file = tmp_path / "bad.csv"
    file.write_text("id,sym,price\n1,A,1.5\n2,B,not-a-number\n")
    done = run_refimpl(
        "import",
        str(file),
        "--table",
        "q",
        "--url",
        server.url,
        "--token",
        server.token,
        "--db",
        db,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("refimpl: ") and "not-a-number" in done.stderr
    assert server.rows("SELECT count(*) FROM q", db) == [[0]]


def test_import_into_a_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = run_refimpl(
        "sql",
        "--data",
        str(data),
        "-c",
        "CREATE TABLE q (id INT PRIMARY KEY, sym SYMBOL, price DOUBLE)",
        cwd=tmp_path,
    )
    assert made.returncode == 0, made.stderr
    file = write_csv(tmp_path / "q.csv", 500)
    done = run_refimpl("import", str(file), "--table", "q", "--data", str(data), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "500 row(s) inserted" in done.stdout
    counted = run_refimpl(
        "sql",
        "--data",
        str(data),
        "--format",
        "csv",
        "-c",
        "SELECT count(*) AS n FROM q",
        cwd=tmp_path,
    )
    assert counted.stdout.splitlines() == ["n", "500"]
    missing = run_refimpl(
        "import", str(tmp_path / "none.csv"), "--table", "q", "--data", str(data), cwd=tmp_path
    )
    assert missing.returncode == 1 and "cannot read" in missing.stderr


def test_a_progress_bar_on_a_terminal(tmp_path: Path, server: Server, db: str) -> None:
    server.sql("CREATE TABLE q (id INT PRIMARY KEY, sym SYMBOL, price DOUBLE)", db)
    file = write_csv(tmp_path / "terminal.csv", 5000)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KDB_")}
    env.update(PYTHONPATH=str(ROOT), TERM="xterm", COLUMNS="120")
    child = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "refimpl",
            "import",
            str(file),
            "--table",
            "q",
            "--url",
            server.url,
            "--token",
            server.token,
            "--db",
            db,
        ],
        env=env,
        encoding="utf-8",
        timeout=120,
        dimensions=(24, 120),
    )
    child.expect("importing terminal.csv")
    child.expect("━")  # the bar
    child.expect(r"5000 row\(s\) inserted into table 'q'")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

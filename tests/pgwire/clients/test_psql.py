r"""psql 15 against a real server, beyond the catalog commands of tests/pgwire/test_psql.py:
`\copy` in its current and its older syntax, `\df`, `\dn`, `\du`, `\l`, `\x` and `\timing`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.pgwire.conftest import PgServer


def psql(pg: PgServer, db: str, *args: str, cwd: Path | None = None) -> str:
    env = {**os.environ, "PGPASSWORD": pg.token, "PGCONNECT_TIMEOUT": "10"}
    command = ["psql", "-X", "-v", "ON_ERROR_STOP=1", "-h", pg.host, "-p", str(pg.port)]
    done = subprocess.run(
        [*command, "-U", "admin", "-d", db, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
        cwd=cwd,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_copy_in_both_syntaxes_and_out(pg: PgServer, db: str, tmp_path: Path) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db)
    (tmp_path / "old.csv").write_text("id,name\n1,a\n2,b\n")
    (tmp_path / "new.csv").write_text("3;c\n")
    out = psql(
        pg,
        db,
        "-c",
        r"\copy t from 'old.csv' csv header",  # the older syntax: options without parentheses
        "-c",
        r"\copy t from 'new.csv' with (format csv, delimiter ';')",
        "-c",
        r"\copy (SELECT id, name FROM t ORDER BY id) to 'out.csv' with (format csv)",
        cwd=tmp_path,
    )
    assert out.splitlines() == ["COPY 2", "COPY 1", "COPY 3"]
    assert (tmp_path / "out.csv").read_text() == "1,a\n2,b\n3,c\n"


def test_catalog_listings_and_display_settings(pg: PgServer, db: str) -> None:
    pg.http.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)", db)
    pg.http.sql("INSERT INTO t VALUES (1, 'a')", db)
    listed = psql(pg, db, "-A", "-t", "-c", r"\dn", "-c", r"\du", "-c", r"\df", "-c", r"\l " + db)
    assert listed.splitlines()[0] == "public|admin"
    assert listed.splitlines()[1].startswith("admin|Superuser")
    assert f"{db}|admin|UTF8|" in listed
    shown = psql(pg, db, "-c", r"\x", "-c", r"\timing", "-c", "SELECT id, name FROM t")
    assert "Expanded display is on." in shown and "Timing is on." in shown
    assert "-[ RECORD 1 ]" in shown and "name | a" in shown and "Time: " in shown

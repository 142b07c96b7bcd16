"""`refimpl sql` as a person uses it: typed into a pseudo-terminal (pexpect)."""

from __future__ import annotations

import re
from pathlib import Path

import pexpect

from tests.http.conftest import Server
from tests.shell.conftest import quit_shell, spawn, type_line

UP = "\x1b[A"


def session(child: pexpect.spawn) -> None:
    """What every shell does, on a data folder or a server."""
    type_line(child, "CREATE TABLE trades (id INT PRIMARY KEY, symbol STRING, price DOUBLE);")
    child.expect("table 'trades' created")
    type_line(child, "INSERT INTO trades VALUES (1, 'AAPL', 101.5), (2, 'MSFT', 99);")
    child.expect(r"2 row\(s\) inserted")
    # A statement over two lines runs at its ';', not at the first Enter.
    type_line(child, "SELECT id, symbol,")
    child.expect("demo->")
    type_line(child, "price FROM trades ORDER BY id;")
    child.expect("AAPL")
    child.expect("101.5")
    child.expect(r"\(2 rows\)")
    # \d lists the tables, \d t describes one.
    type_line(child, "\\d")
    child.expect("trades")
    child.expect(r"\(1 row\)")
    type_line(child, "\\d trades")
    child.expect("primary_key")
    child.expect("DOUBLE")
    # The error's position, under the statement.
    type_line(child, "SELECT id FROM trades WHERE;")
    child.expect("ERROR: ")
    child.expect("LINE 1: SELECT id FROM trades WHERE;")
    child.expect(r"\^")
    # Tab completes a column of the table the statement names.
    child.send("SELECT symb\t")
    child.expect(r"symb(\x1b\[[0-9;?]*[A-Za-z])*ol")  # completed in place (drawn as 'ol')
    child.send(" FROM trades WHERE id = 2;\r")
    child.expect("MSFT")
    type_line(child, "\\timing")
    child.expect("Timing is on.")
    type_line(child, "\\format csv")
    child.expect("Output format is csv.")
    type_line(child, "SELECT id, symbol FROM trades WHERE id = 1;")
    child.expect("id,symbol")
    child.expect("1,AAPL")
    child.expect(r"Time: \d+\.\d+ ms")


def test_a_shell_on_a_data_folder_keeps_its_history(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--data", str(tmp_path / "data"))
    session(child)
    type_line(child, "SELECT count(*) AS n FROM trades;")
    child.expect("n")
    quit_shell(child)
    folder = tmp_path / ".refimpl" / "history"
    assert folder.stat().st_mode & 0o777 == 0o700
    (history_file,) = folder.iterdir()
    assert history_file.name.rpartition("-")[0].endswith("_data")  # named after its folder
    assert history_file.stat().st_mode & 0o777 == 0o600
    history = history_file.read_text()
    assert "+SELECT id, symbol,\n+price FROM trades ORDER BY id;" in history

    # A new run recalls the last statements with the Up key: \q, then the count.
    child = spawn(tmp_path, "--data", str(tmp_path / "data"))
    child.send(UP + UP)
    child.expect("count")
    child.send("\r")
    child.expect(r"\(1 row\)")
    quit_shell(child)

    # A shell on another data folder has a history of its own: Up recalls nothing of this.
    child = spawn(tmp_path, "--data", str(tmp_path / "other"))
    child.send(UP + UP + UP)
    type_line(child, ";")  # runs what Up recalled, or nothing
    quit_shell(child)
    assert "count" not in (child.before or "")
    assert len(list(folder.iterdir())) == 2


def test_a_shell_on_a_server(tmp_path: Path, server: Server) -> None:
    child = spawn(tmp_path, "--url", server.url, "--token", server.token)
    assert server.url in (child.before or "")  # the greeting names where it runs
    session(child)
    quit_shell(child)


def test_a_wrong_token_is_told(tmp_path: Path, server: Server) -> None:
    child = spawn(tmp_path, "--url", server.url, "--token", "kdb_not_a_token")
    type_line(child, "SELECT 1;")
    child.expect("ERROR: ")
    child.expect("token")
    quit_shell(child)


def test_sql_is_coloured_as_it_is_typed(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--data", str(tmp_path / "data"))
    child.send("SELECT 'x' AS y")
    # A keyword and a string each in a colour of its own (256-colour codes: 38;5;N).
    child.expect(
        r"\x1b\[[0-9;]*38;5;(\d+)[0-9;]*mSELECT\x1b\[0m \x1b\[[0-9;]*38;5;(\d+)[0-9;]*m'x'"
    )
    colours = child.match
    assert isinstance(colours, re.Match)  # what expect() matched
    keyword, string = colours.group(1), colours.group(2)
    assert keyword != string
    child.send(";\r")
    child.expect(r"\(1 row\)")
    quit_shell(child)

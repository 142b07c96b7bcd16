"""A transaction typed over several lines, as a person types it: what ROLLBACK undoes is never
committed, what COMMIT commits is, and an error inside rolls it all back; on a data folder
(one engine session) and on a server over HTTP (the shell holds the transaction)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest

from tests.http.conftest import Server
from tests.shell.conftest import quit_shell, spawn, type_line

_TABLES = itertools.count()


class Place:
    """Where a shell runs (a data folder or a server) and a way to read it from outside."""

    def __init__(self, args: tuple[str, ...], count: Callable[[str], int]) -> None:
        self.args = args
        self.count = count


@pytest.fixture(params=["data", "url"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "data":
        data = tmp_path / "data"

        def count_in_folder(table: str) -> int:
            import refimpl

            with refimpl.connect(data) as connection:
                return int(connection.execute(f"SELECT count(*) FROM {table}").rows[0][0])

        yield Place(("--data", str(data)), count_in_folder)
        return
    server: Server = request.getfixturevalue("server")

    def count_on_server(table: str) -> int:
        answer = server.request("POST", "/exec", data=f"SELECT count(*) AS n FROM {table}")
        assert answer.status_code == 200, answer.text
        return int(answer.json()["dataset"][0][0])

    yield Place(("--url", server.url, "--token", server.token), count_on_server)


def expect_one(child: pexpect.spawn, column: str, value: str) -> None:
    """A table of one row whose only column `column` holds `value`."""
    child.expect(column)  # the header (styled: escape codes around it)
    child.expect(rf"\s{re.escape(value)}\r\n\(1 row\)")


def shell_with_table(tmp_path: Path, place: Place) -> tuple[pexpect.spawn, str]:
    """A shell on `place` with a new table of three rows (ids 1, 2, 3)."""
    table = f"t{next(_TABLES)}"
    child = spawn(tmp_path, *place.args)
    type_line(child, f"CREATE TABLE {table} (id INT PRIMARY KEY);")
    child.expect(f"table '{table}' created")
    type_line(child, f"INSERT INTO {table} VALUES (1), (2), (3);")
    child.expect(r"3 row\(s\) inserted")
    return child, table


def test_rollback_typed_on_separate_lines_commits_nothing(tmp_path: Path, place: Place) -> None:
    child, table = shell_with_table(tmp_path, place)
    type_line(child, "BEGIN;")
    child.expect("transaction started")
    child.expect(r"demo=\*>")  # the prompt shows the open transaction
    type_line(child, f"DELETE FROM {table};")
    child.expect(r"3 row\(s\) deleted")
    type_line(child, f"SELECT count(*) AS inside FROM {table};")  # sees its own delete
    expect_one(child, "inside", "0")
    type_line(child, "ROLLBACK;")
    child.expect("transaction rolled back")
    child.expect("demo=>")
    type_line(child, f"SELECT count(*) AS after FROM {table};")
    expect_one(child, "after", "3")
    quit_shell(child)
    assert place.count(table) == 3


def test_commit_typed_on_separate_lines_commits(tmp_path: Path, place: Place) -> None:
    child, table = shell_with_table(tmp_path, place)
    type_line(child, "BEGIN;")
    child.expect("transaction started")
    type_line(child, f"DELETE FROM {table} WHERE id = 1;")
    child.expect(r"1 row\(s\) deleted")
    type_line(child, f"INSERT INTO {table} VALUES (4), (5);")
    child.expect(r"2 row\(s\) inserted")
    type_line(child, "COMMIT;")
    child.expect("transaction committed")
    quit_shell(child)
    assert place.count(table) == 4


def test_an_error_inside_rolls_the_transaction_back(tmp_path: Path, place: Place) -> None:
    child, table = shell_with_table(tmp_path, place)
    type_line(child, "BEGIN;")
    child.expect("transaction started")
    type_line(child, f"INSERT INTO {table} VALUES (10);")
    child.expect(r"1 row\(s\) inserted")
    type_line(child, f"INSERT INTO {table} VALUES (1);")
    child.expect("ERROR: .*duplicate primary key")
    child.expect("The transaction is rolled back: nothing of it was committed.")
    child.expect("demo=>")
    type_line(child, "COMMIT;")
    child.expect("ERROR: there is no open transaction")
    quit_shell(child)
    assert place.count(table) == 3


def test_a_transaction_on_one_line_shows_each_answer(tmp_path: Path, place: Place) -> None:
    child, table = shell_with_table(tmp_path, place)
    type_line(
        child,
        f"BEGIN; DELETE FROM {table} WHERE id = 3; SELECT count(*) AS n FROM {table};"
        " ROLLBACK; SELECT 'a;b' AS s;",
    )
    child.expect("transaction started")
    child.expect(r"1 row\(s\) deleted")
    expect_one(child, "n", "2")
    child.expect("transaction rolled back")
    expect_one(child, "s", "a;b")  # a ; in a string does not end the statement
    quit_shell(child)
    assert place.count(table) == 3


def test_the_banner_says_how_a_transaction_runs_over_http(tmp_path: Path, server: Server) -> None:
    child = spawn(tmp_path, "--url", server.url, "--token", server.token)
    assert "a transaction's statements run at its COMMIT" in (child.before or "")
    quit_shell(child)


def test_a_commit_that_fails_over_http_commits_nothing(tmp_path: Path, server: Server) -> None:
    place = Place(("--url", server.url, "--token", server.token), lambda table: 0)
    child, table = shell_with_table(tmp_path, place)
    type_line(child, "BEGIN;")
    type_line(child, f"INSERT INTO {table} VALUES (7);")
    child.expect(r"1 row\(s\) inserted")
    type_line(child, f"DELETE FROM {table} WHERE id = 1;")
    child.expect(r"1 row\(s\) deleted")
    type_line(child, "\\c demo")  # the held transaction would be lost: refused
    child.expect("ERROR: a transaction is open; COMMIT or ROLLBACK it first")
    # Another session commits the same key meanwhile: the held INSERT now fails at COMMIT.
    other = server.request("POST", "/exec", data=f"INSERT INTO {table} VALUES (7)")
    assert other.status_code == 200, other.text
    type_line(child, "COMMIT;")
    child.expect(r"ERROR: duplicate primary key 7 .*\(in the transaction's statement 1: INSERT")
    child.expect("The transaction is rolled back: nothing of it was committed.")
    child.expect("demo=>")
    quit_shell(child)
    answer = server.request("POST", "/exec", data=f"SELECT id FROM {table} ORDER BY id")
    assert answer.json()["dataset"] == [[1], [2], [3], [7]]  # the DELETE did not commit

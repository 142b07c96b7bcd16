"""Crafted input that reached a traceback (500) answers a clear 400 on a real server:
copy positions `<lsn>:<hex>` that decode to other shapes, types or depths (on
`/api/changes` and on `/stream/changes`, there before authentication), and BACKUP DATABASE
TO a name no file system takes. Nothing is written and the server logs no traceback."""

from __future__ import annotations

import msgspec
import pytest

from tests.http.conftest import Server

DEEP = "2:" + (b"\x92\x90" + b"\x91" * 3000 + b"\x90").hex()


def _crafted(place: object) -> str:
    return "2:" + msgspec.msgpack.encode(place).hex()


# (position, whether its shape alone is wrong: then it is refused before authentication)
CRAFTED = [
    ("2:05", True),
    (_crafted({"a": 1, "b": 2}), True),
    (_crafted([[], [["a"]]]), True),
    (_crafted([[], ["zz"]]), False),  # a text where the INT key goes
    (_crafted([[1], [1]]), False),  # a partition the table has not
    (DEEP, True),
]


@pytest.fixture
def keyed(server: Server, db: str) -> str:
    server.sql("CREATE TABLE t (id INT PRIMARY KEY, v STRING)", db)
    server.sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", db)
    return db


@pytest.mark.parametrize(("position", "malformed"), CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_copy_positions_are_400s(
    server: Server, keyed: str, position: str, malformed: bool
) -> None:
    asked = {"db": keyed, "table": "t", "initial": "true"}
    changes = server.get("/api/changes", params={**asked, "format": "json", "from": position})
    assert changes.status_code == 400, changes.text
    assert "names no place in a copy" in changes.json()["error"]
    for token in (None, server.token):
        stream = server.get(
            "/stream/changes", params=asked, headers={"Last-Event-ID": position}, token=token
        )
        if token is None and not malformed:
            assert stream.status_code == 401  # checked against the table once let in
            continue
        assert stream.status_code == 400, stream.text
        assert "names no place in a copy" in stream.json()["error"]
    assert server.rows("SELECT count(*) AS n FROM t", keyed) == [[3]]
    assert "Traceback" not in server.log.read_text()


@pytest.mark.parametrize(
    ("name", "says"),
    [("a\x00b", "control character"), ("x" * 300, "too long"), ("a\nb", "control character")],
    ids=["nul", "long", "newline"],
)
def test_backup_names_no_file_system_takes_are_400s(
    server: Server, keyed: str, name: str, says: str
) -> None:
    answer = server.exec(f"BACKUP DATABASE {keyed} TO '{name}'", keyed)
    assert answer.status_code == 400, answer.text
    assert says in answer.json()["error"]
    backups = server.data / "backup"
    assert not backups.exists() or list(backups.iterdir()) == []
    assert "Traceback" not in server.log.read_text()

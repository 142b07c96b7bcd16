"""A damaged slots or publications file stops the start as every damaged durable file does:
a StorageError naming the file, what is wrong and the way on; `refimpl check` reports it;
never a traceback, never a start on a guess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import SlotError, StorageError

SLOT = {
    "name": "s",
    "database": "demo",
    "plugin": "test_decoding",
    "owner": "admin",
    "confirmed": 4095,
    "created": 4095,
    "temporary": False,
    "lost": False,
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A data folder made by the engine, closed."""
    data = tmp_path / "data"
    Instance.open(data, EngineOptions()).close()
    return data


def _write_slots(folder: Path, text: str) -> Path:
    path = folder / "replication_slots.json"
    path.write_text(text, "utf-8")
    return path


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (json.dumps({"slots": [SLOT]})[:40], "is not JSON"),
        ("", "is not JSON"),
        (json.dumps([SLOT]), 'has no "slots" list'),
        (json.dumps({"slots": [{**SLOT, "confirmed": "0/FFF"}]}), "\"confirmed\" '0/FFF'"),
        (json.dumps({"slots": [{**SLOT, "confirmed": True}]}), "not an integer"),
        (json.dumps({"slots": [{**SLOT, "lost": 1}]}), "not true or false"),
        (json.dumps({"slots": [{k: v for k, v in SLOT.items() if k != "plugin"}]}), 'no "plugin"'),
        (json.dumps({"slots": [{**SLOT, "extra": 1}]}), "unknown fields ['extra']"),
        (json.dumps({"slots": ["s"]}), "record 1 is not an object"),
    ],
)
def test_a_damaged_slots_file_stops_the_start(folder: Path, text: str, says: str) -> None:
    path = _write_slots(folder, text)
    with pytest.raises(StorageError) as caught:
        Instance.open(folder, EngineOptions()).close()
    message = caught.value.message
    assert str(path) in message and says in message
    assert "restore the file from a backup, or move it aside" in message
    assert path.read_text("utf-8") == text  # nothing was changed


def test_a_damaged_publications_file_stops_the_start(folder: Path) -> None:
    path = folder / "publications.json"
    path.write_text(json.dumps({"publications": [{"database": "demo", "name": "p"}]}), "utf-8")
    with pytest.raises(StorageError, match=r'publications\.json: record 1 has no "owner"'):
        Instance.open(folder, EngineOptions()).close()


def test_a_sound_file_is_read(folder: Path) -> None:
    _write_slots(folder, json.dumps({"slots": [{**SLOT, "confirmed": 8191}]}))
    instance = Instance.open(folder, EngineOptions())
    try:
        assert instance.slots.get("s").confirmed == 8191
    finally:
        instance.close()


def _refimpl(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "refimpl", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_serve_and_check_name_the_file_without_a_traceback(folder: Path) -> None:
    path = _write_slots(folder, '{"slots": [{"name": "s", "dat')
    served = _refimpl("serve", "--data", str(folder), "--port", "0")
    assert served.returncode != 0
    assert "Traceback" not in served.stderr
    assert f"the replication slots file {path} is not JSON" in served.stderr
    checked = _refimpl("check", "--data", str(folder))
    assert checked.returncode == 1
    assert f"replication slots: the replication slots file {path} is not JSON" in checked.stdout
    assert checked.stdout.rstrip().endswith("state: DAMAGED")
    _write_slots(folder, json.dumps({"slots": [SLOT]}))
    checked = _refimpl("check", "--data", str(folder))
    assert checked.returncode == 0, checked.stdout
    assert "replication slots: 1 in replication_slots.json" in checked.stdout


def test_a_backup_keeps_the_publications_and_not_the_slots(folder: Path, tmp_path: Path) -> None:
    instance = Instance.open(folder, EngineOptions())
    try:
        session = instance.session()
        session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        session.execute("CREATE PUBLICATION p FOR TABLE t")
        session.execute("SELECT * FROM pg_create_logical_replication_slot('s', 'test_decoding')")
    finally:
        instance.close()
    backup, restored = tmp_path / "backup", tmp_path / "restored"
    assert _refimpl("backup", "--data", str(folder), "--to", str(backup)).returncode == 0
    assert (backup / "publications.json").is_file()
    assert not (backup / "replication_slots.json").exists()
    done = _refimpl("restore", "--from", str(backup), "--data", str(restored))
    assert done.returncode == 0, done.stderr
    instance = Instance.open(restored, EngineOptions())
    try:
        assert [(p.name, p.tables) for p in instance.publications.of("demo")] == [("p", ("t",))]
        assert instance.slots.all() == []
    finally:
        instance.close()


def test_a_dropped_database_takes_its_slots_and_publications(folder: Path) -> None:
    instance = Instance.open(folder, EngineOptions())
    try:
        instance.create_database("d")
        session = instance.session("d")
        session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        session.execute("CREATE PUBLICATION p FOR TABLE t")
        session.execute("SELECT * FROM pg_create_logical_replication_slot('s', 'test_decoding')")
        instance.session().execute(
            "SELECT * FROM pg_create_logical_replication_slot('kept', 'test_decoding')"
        )
        instance.slots.acquire("s", pid=7)  # a client streams from it: the drop waits for it
        with pytest.raises(SlotError, match=r'database "d" is used by an active') as refused:
            instance.drop_database("d")
        assert refused.value.sqlstate == "55006"
        assert instance.has_database("d") and instance.publications.of("d")
        instance.slots.release("s", pid=7)
        instance.drop_database("d")
        assert [s.name for s in instance.slots.all()] == ["kept"]
        instance.create_database("d")  # a new database of the name starts without them
        assert instance.publications.of("d") == []
    finally:
        instance.close()
    reopened = Instance.open(folder, EngineOptions())  # and so do the files
    try:
        assert [s.name for s in reopened.slots.all()] == ["kept"]
        assert reopened.publications.count() == 0
    finally:
        reopened.close()

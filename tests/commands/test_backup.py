"""`refimpl backup` under write load, `refimpl restore` onto a new timeline, readers of the
restored server (410 and `reset`, never a hole), and `refimpl check` of a backup."""

from __future__ import annotations

import json
import os
import random
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import refimpl as refimpl_engine
from refimpl.commands.backup import backup_data_folder, restore_data_folder
from refimpl.engine.instance import check_data
from refimpl.errors import StorageError
from tests.http.conftest import Server, run_refimpl, start_server
from tests.http.stream_client import open_stream

DB = "bk"


class Writer(threading.Thread):
    """One writer of single-row commits, each the next LSN of the database; `ops[k]` is
    the commit of LSN `first_lsn + k`, so the model at any LSN is the ops up to it."""

    def __init__(self, server: Server, first_lsn: int) -> None:
        super().__init__(daemon=True)
        self.server, self.first_lsn = server, first_lsn
        self.ops: list[tuple[str, int, str | None]] = []
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        rng = random.Random(19)
        live: list[int] = []
        next_id = 0
        try:
            while not self.stop.is_set():
                roll = rng.random()
                if roll < 0.6 or not live:
                    op: tuple[str, int, str | None] = ("put", next_id, "v" * rng.randint(1, 300))
                    next_id += 1
                    live.append(op[1])
                    self.server.sql(f"INSERT INTO t VALUES ({op[1]}, '{op[2]}')", DB)
                elif roll < 0.85:
                    op = ("put", rng.choice(live), f"u{len(self.ops)}")
                    self.server.sql(f"UPDATE t SET s = '{op[2]}' WHERE id = {op[1]}", DB)
                else:
                    op = ("del", live.pop(rng.randrange(len(live))), None)
                    self.server.sql(f"DELETE FROM t WHERE id = {op[1]}", DB)
                self.ops.append(op)
                if len(self.ops) % 50 == 0:
                    self.server.sql("CHECKPOINT", DB)  # logs nothing, moves the checkpoint
        except BaseException as error:  # the test reports it
            self.error = error

    def state_at(self, lsn: int) -> dict[int, str]:
        rows: dict[int, str] = {}
        for op, key, value in self.ops[: lsn - self.first_lsn + 1]:
            if op == "put":
                rows[key] = value  # type: ignore[assignment]
            else:
                del rows[key]
        return rows


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Writer, Server]]:
    """A backup taken by `refimpl backup` while a writer commits, and the writer's model."""
    root = tmp_path_factory.mktemp("backup")
    server = start_server(root / "data")
    try:
        server.sql(f"CREATE DATABASE {DB}")
        server.sql(f"ALTER DATABASE {DB} SET WAL_ARCHIVE = '64KB'", DB)  # LSN 1: trims often
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, s STRING)", DB)  # LSN 2
        writer = Writer(server, first_lsn=3)
        writer.start()
        while len(writer.ops) < 150 and writer.error is None:
            writer.stop.wait(0.05)
        done = run_refimpl(
            "backup", "--data", str(server.data), "--to", str(root / "copy"), cwd=root
        )
        taken_during = len(writer.ops)
        while len(writer.ops) < taken_during + 50 and writer.error is None:
            writer.stop.wait(0.05)
        writer.stop.set()
        writer.join(60)
        assert writer.error is None, writer.error
        assert done.returncode == 0, done.stderr
        yield root / "copy", writer, server
    finally:
        assert server.stop() == 0


def _manifest_lsn(backup: Path) -> int:
    return json.loads((backup / "backup.json").read_text())["databases"][DB]["lsn"]


def test_the_backup_restores_to_exactly_the_state_at_its_lsn(
    taken: tuple[Path, Writer, Server], tmp_path: Path
) -> None:
    backup, writer, original = taken
    lsn = _manifest_lsn(backup)
    assert writer.first_lsn < lsn < writer.first_lsn + len(writer.ops) - 1  # taken mid-load
    checked = run_refimpl("check", "--data", str(backup), cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    assert f"backup: database '{DB}' at LSN {lsn}" in checked.stdout

    refused = run_refimpl(
        "restore", "--from", str(backup), "--data", str(original.data), cwd=tmp_path
    )
    assert refused.returncode == 1 and "in use by another refimpl process" in refused.stderr

    done = run_refimpl(
        "restore", "--from", str(backup), "--data", str(tmp_path / "new"), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    restored = start_server(tmp_path / "new")
    restored.token = original.token  # the access file came back: the same admin, no new token
    try:
        model = writer.state_at(lsn)
        rows = restored.rows("SELECT id, s FROM t ORDER BY id", DB)
        assert rows == [[key, model[key]] for key in sorted(model)]
        stats = restored.get("/api/stats", params={"db": DB}).json()["databases"][DB]
        base = stats["durable_lsn"]
        assert base > lsn and stats["oldest_lsn"] == base + 1
        assert stats["timeline"] == {
            "base_lsn": base,
            "backup_lsn": lsn,
            "restored_at_us": stats["timeline"]["restored_at_us"],
        }

        # Positions of the old timeline: before the backup's LSN, at it, past it: all gone.
        old_boot = original.get("/api/rev", params={"db": DB, "table": "t"}).json()["boot"]
        for position in (2, lsn, lsn + 5):
            answer = restored.get(
                "/api/changes", params={"db": DB, "table": "t", "from": position, "format": "json"}
            )
            assert answer.status_code == 410, answer.text
            assert answer.json()["gone_before"] == base + 1
            stream = open_stream(restored, DB, headers={"Last-Event-ID": str(position)})
            assert [e["event"] for e in stream.take(2)] == ["reset", "ready"]
            stream.close()
        assert restored.get("/api/rev", params={"db": DB, "table": "t"}).json()["boot"] != old_boot

        restored.sql("INSERT INTO t VALUES (-1, 'after the restore')", DB)
        fresh = restored.get(
            "/api/changes", params={"db": DB, "table": "t", "from": 0, "format": "json"}
        ).json()
        assert [(c["lsn"], c["row"]["id"]) for c in fresh["changes"]] == [(base + 1, -1)]
    finally:
        assert restored.stop() == 0


def test_check_finds_a_damaged_backup_and_restore_refuses_it(
    taken: tuple[Path, Writer, Server], tmp_path: Path
) -> None:
    backup = taken[0]
    segments = sorted((backup / DB / "wal").glob("*.wal"))
    cut = tmp_path / "cut"
    shutil.copytree(backup, cut)
    last = cut / DB / "wal" / segments[-1].name
    os.truncate(last, last.stat().st_size - 1)  # a torn tail: sound as a log, short as a backup
    flipped = tmp_path / "flipped"
    shutil.copytree(backup, flipped)
    checkpoint = next((flipped / DB / "checkpoints").glob("*.kdb"))
    data = bytearray(checkpoint.read_bytes())
    data[len(data) // 2] ^= 0xFF
    checkpoint.write_bytes(bytes(data))
    for damaged in (cut, flipped):  # the commands' own functions: the CLI runs them as above
        report, sound = check_data(damaged)
        assert not sound and report.endswith("state: DAMAGED"), report
        with pytest.raises(StorageError, match="nothing was restored"):
            restore_data_folder(damaged, tmp_path / "r")
        assert not (tmp_path / "r").exists()


def _crafted_backups(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """Backups whose manifests name places outside the backup and the data folder, each
    with the file the name points to in place (and its size and CRC32 right), so that
    only the names' rule can refuse them."""
    source = tmp_path / "source"
    conn = refimpl_engine.connect(str(source))
    conn.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (1)")
    conn.close()
    (source / "kdb.conf").write_text("")
    for case, said in [
        ("escdb", "'../escdb' is not a database name"),
        ("evil", "'../evil.txt' is not a file a backup keeps"),
        ("deep", "is not a file of database 'demo'"),
        ("link", "is a symbolic link"),
    ]:
        backup = tmp_path / case / "backup"
        backup_data_folder(source, backup)
        manifest = json.loads((backup / "backup.json").read_text())
        listed = manifest["databases"]["demo"]["files"]
        if case == "escdb":
            shutil.move(backup / "demo", backup.parent / "escdb")
            files = {"../escdb" + path.removeprefix("demo"): e for path, e in listed.items()}
            manifest["databases"] = {"../escdb": {**manifest["databases"]["demo"], "files": files}}
        elif case == "evil":
            shutil.copy(backup / "kdb.conf", backup.parent / "evil.txt")
            manifest["files"]["../evil.txt"] = manifest["files"]["kdb.conf"]
        elif case == "deep":
            path, entry = next(iter(listed.items()))
            (backup / "demo" / "wal" / "sub").mkdir()
            shutil.copy(backup / path, backup / "demo" / "wal" / "sub" / "x.wal")
            listed["demo/wal/sub/x.wal"] = entry
        else:
            path = next(iter(listed))
            shutil.move(backup / path, backup.parent / "elsewhere.wal")
            (backup / path).symlink_to(backup.parent / "elsewhere.wal")
        (backup / "backup.json").write_text(json.dumps(manifest))
        yield backup, said


def test_restore_checks_every_name_and_writes_nothing_outside(tmp_path: Path) -> None:
    for backup, said in _crafted_backups(tmp_path):
        before = sorted(p for p in tmp_path.rglob("*"))
        target = backup.parent / "data" / "restored"
        with pytest.raises(StorageError, match="nothing was restored") as refused:
            restore_data_folder(backup, target)
        assert said in refused.value.message
        assert not target.exists() and not target.parent.exists()
        assert sorted(p for p in tmp_path.rglob("*")) == before

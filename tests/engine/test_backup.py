"""BACKUP DATABASE under write load: the copy is the state at its LSN (against a model), also
while checkpoints trim the log under it; a restore goes on on a new timeline. Its names
follow the import folder's rule, and only the admin user may."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from refimpl.commands.backup import restore_data_folder
from refimpl.engine.instance import Instance
from refimpl.engine.rights import Principal
from refimpl.engine.storage.restore import timeline_base
from refimpl.errors import Forbidden, InvalidValue


def test_a_backup_under_load_restores_to_the_state_at_its_lsn(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    try:
        setup = instance.session("demo")
        setup.execute("ALTER DATABASE demo SET WAL_ARCHIVE = '16KB'")  # LSN 1: trims often
        setup.execute("CREATE TABLE t (id INT PRIMARY KEY, n INT, pad STRING)")  # LSN 2
        values: list[int] = []  # values[k] = k: the n written by the commit of LSN k + 3
        stop = threading.Event()

        def write() -> None:
            session = instance.session("demo")
            k = 0
            while not stop.is_set():
                session.execute(
                    f"INSERT INTO t VALUES ({k % 40}, {k}, '{'p' * 200}') "
                    if k < 40
                    else f"UPDATE t SET n = {k} WHERE id = {k % 40}"
                )
                values.append(k)
                k += 1
                if k % 25 == 0:
                    session.execute("CHECKPOINT")

        writer = threading.Thread(target=write)
        writer.start()
        try:
            while len(values) < 120:
                stop.wait(0.01)
            answers = [setup.execute(f"BACKUP DATABASE demo TO 'b{i}'").message for i in range(3)]
        finally:
            stop.set()
            writer.join()
    finally:
        instance.close()
    assert all("backed up at LSN" in (answer or "") for answer in answers)
    for i in range(3):
        backup = tmp_path / "data" / "backup" / f"b{i}"
        lsn = json.loads((backup / "backup.json").read_text())["databases"]["demo"]["lsn"]
        model = {}
        for k in range(lsn - 2):  # commit k has LSN k + 3: those up to the backup's LSN
            model[k % 40] = k
        before = timeline_base(lsn)
        restore_data_folder(backup, tmp_path / f"restored{i}")
        restored = Instance.open(tmp_path / f"restored{i}")
        try:
            session = restored.session("demo")
            rows = session.execute("SELECT id, n FROM t ORDER BY id").rows
            assert rows == sorted(model.items())
            base = restored.database("demo").log.durable_lsn
            assert base >= before > lsn
            session.execute("INSERT INTO t VALUES (100, 0, 'x')")
            assert restored.database("demo").log.durable_lsn == base + 1
        finally:
            restored.close()


def test_backup_names_follow_the_import_folders_rule(tmp_path: Path) -> None:
    instance = Instance.open(tmp_path / "data")
    try:
        session = instance.session("demo")
        outside = tmp_path / "outside"
        outside.mkdir()
        (tmp_path / "data" / "backup").mkdir()
        (tmp_path / "data" / "backup" / "link").symlink_to(outside)
        for name, said in [
            ("link/x", "leads out of the backup folder"),
            ("../x", "relative path without '..'"),
            ("/x", "relative path"),
            ("", "relative path"),
            ("a\x00b", "cannot hold a control character"),
            ("a\nb", "cannot hold a control character"),
            ("x" * 300, "too long \\(300 bytes"),
            ("/".join(["y" * 200] * 6), "at most 255 bytes a part and 1024 in all"),
        ]:
            with pytest.raises(InvalidValue, match=said):
                session.execute(f"BACKUP DATABASE demo TO '{name}'")
        assert list(outside.iterdir()) == []
        assert [p.name for p in (tmp_path / "data" / "backup").iterdir()] == ["link"]
        viewer = instance.session("demo", Principal("viewer"))
        with pytest.raises(Forbidden):
            viewer.execute("BACKUP DATABASE demo TO 'mine'")
    finally:
        instance.close()

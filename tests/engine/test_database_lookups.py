"""Finding a database by its name never waits for a CREATE DATABASE of another that is
still making its folder durable: every request looks its database up first."""

from __future__ import annotations

import threading
from pathlib import Path

from refimpl.engine.files import FileOps
from refimpl.engine.instance import Instance


class HeldFolderSync(FileOps):
    """Real file operations, but a folder's sync waits while `held` is set."""

    def __init__(self) -> None:
        self.held = threading.Event()
        self.waiting = threading.Event()
        self.release = threading.Event()

    def sync_directory(self, path: Path) -> None:
        if self.held.is_set():
            self.waiting.set()
            self.release.wait(30)
        super().sync_directory(path)


def test_a_lookup_does_not_wait_for_a_database_being_made(tmp_path: Path) -> None:
    files = HeldFolderSync()
    instance = Instance.open(tmp_path / "data", files=files)
    try:
        session = instance.session()
        session.execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        session.execute("INSERT INTO t VALUES (1)")
        files.held.set()
        making = threading.Thread(target=instance.create_database, args=("other",))
        making.start()
        assert files.waiting.wait(10), "the CREATE DATABASE did not reach its folder's sync"
        looked_up: list[object] = []
        lookups = threading.Thread(
            target=lambda: looked_up.extend(
                [
                    instance.has_database("demo"),
                    instance.has_database("other"),
                    instance.database("demo") is session.database,
                    instance.session().execute("SELECT id FROM t").rows,
                ]
            )
        )
        lookups.start()
        lookups.join(5)
        answered = not lookups.is_alive()
        files.release.set()
        making.join(10)
        lookups.join(10)
        assert answered, "a look-up waited for the CREATE DATABASE of another database"
        assert looked_up == [True, False, True, [(1,)]]
        assert instance.has_database("other")
    finally:
        files.release.set()
        instance.close()

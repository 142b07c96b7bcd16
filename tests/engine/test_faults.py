"""Disk faults under the engine: every file operation of a fixed workload failed in turn.

The workload (`disk_faults.STEPS`: creates, inserts, updates, a checkpoint, grants, token
drops, a new database) runs on a `FaultyFiles` that fails its Nth file operation with EIO or
ENOSPC, or writes short, for N = 1, 2, ... up to the workload's last operation. After each:

- every failure the engine raised is a KdbError the HTTP layer answers with a 4xx or the
  documented 503: never a bare OSError, never a 500;
- a restart on a sound disk opens (no damage, whatever failed) and shows exactly what was
  acknowledged: every acknowledged step's change, no change of a failed user, token or grant
  step, and a failed commit's change at most where its record may have reached the log.

The default run takes every 5th operation (each kind from another offset, so that together
they cover a fifth of them each); the `long` form (and `python tools/fault_soak.py`) takes all.
Then the findings of issue 13 one by one: a DROP TOKEN or REVOKE whose access-file fsync fails
changes nothing, in memory or after a restart; a CHECKPOINT on a full disk answers the 503 and
leaves no temporary file.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from refimpl.errors import StorageError, Unauthorized
from refimpl.http.error_answers import status_of
from tests.engine.disk_faults import (
    KINDS,
    FaultyFiles,
    assert_one_of,
    count_operations,
    observe,
    possible_states,
    reopened,
    run_workload,
)

OPTIONS = EngineOptions()
STRIDE = 5


def check_fault(folder: Path, fail_at: int, kind: str) -> FaultyFiles:
    files = FaultyFiles(fail_at, kind)
    done, tokens = run_workload(folder, files)
    context = f"{kind} at operation {fail_at} ({files.failed})"
    with reopened(folder) as instance:
        assert_one_of(observe(instance, tokens), possible_states(done), context)
    return files


@pytest.fixture(scope="module")
def operations(tmp_path_factory: pytest.TempPathFactory) -> int:
    return count_operations(tmp_path_factory.mktemp("count"))


@pytest.mark.parametrize("kind", KINDS)
def test_every_fifth_file_operation_failed_in_turn(tmp_path, operations, kind):
    offset = KINDS.index(kind) % STRIDE + 1
    for fail_at in range(offset, operations + 1, STRIDE):
        check_fault(tmp_path / f"{fail_at}", fail_at, kind)


@pytest.mark.long
@pytest.mark.parametrize("kind", KINDS)
def test_every_file_operation_failed_in_turn(tmp_path, operations, kind):
    for fail_at in range(1, operations + 1):
        check_fault(tmp_path / f"{fail_at}", fail_at, kind)


# --- the findings one by one --------------------------------------------------------------


class FailingSyncs(FaultyFiles):
    """Fails every fsync with ENOSPC while `failing` is set; a full disk, on demand."""

    def __init__(self) -> None:
        super().__init__()
        self.failing = False

    def fsync(self, fd: int) -> None:
        if self.failing:
            raise OSError(errno.ENOSPC, "No space left on device (injected)")
        super().fsync(fd)


def full_disk_instance(folder: Path) -> tuple[Instance, FailingSyncs, str]:
    files = FailingSyncs()
    instance = Instance.open(folder, OPTIONS, files)
    session = instance.session()
    session.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    session.execute("INSERT INTO t VALUES (1)")
    session.execute("CREATE USER u")
    token = session.execute("CREATE TOKEN FOR u").rows[0][0]
    session.execute("GRANT READ ON DATABASE demo TO u")
    session.close()
    return instance, files, token


def assert_storage_503(error: BaseException) -> None:
    assert isinstance(error, StorageError), repr(error)
    assert status_of(error) == 503
    assert "could not be saved" in error.message and "No space left" in error.message


def test_a_token_drop_that_cannot_be_saved_changes_nothing(tmp_path):
    instance, files, token = full_disk_instance(tmp_path)
    files.failing = True
    session = instance.session()
    with pytest.raises(StorageError) as caught:
        session.execute(f"DROP TOKEN '{token}'")
    assert_storage_503(caught.value)
    assert instance.access.authenticate(token).name == "u"  # not dropped in memory
    files.failing = False
    session.close()
    instance.close()
    with reopened(tmp_path) as again:  # nor on disk
        assert again.access.authenticate(token).name == "u"
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_revoke_that_cannot_be_saved_changes_nothing_and_a_later_one_works(tmp_path):
    instance, files, token = full_disk_instance(tmp_path)
    files.failing = True
    session = instance.session()
    with pytest.raises(StorageError) as caught:
        session.execute("REVOKE READ ON DATABASE demo FROM u")
    assert_storage_503(caught.value)
    assert session.execute("SHOW GRANTS FOR u").rows == [("u", "READ", "demo", None)]
    files.failing = False  # the disk has room again: the same statement now works
    session.execute("REVOKE READ ON DATABASE demo FROM u")
    session.execute(f"DROP TOKEN '{token}'")
    session.close()
    instance.close()
    with reopened(tmp_path) as again:
        session = again.session()
        assert session.execute("SHOW GRANTS FOR u").rows == []
        session.close()
        with pytest.raises(Unauthorized):
            again.access.authenticate(token)


def test_a_checkpoint_on_a_full_disk_answers_503_and_leaves_no_file(tmp_path):
    instance, files, _token = full_disk_instance(tmp_path)

    def files_of_demo() -> list[str]:
        return sorted(p.name for p in (tmp_path / "demo").rglob("*") if p.is_file())

    before = files_of_demo()
    files.failing = True
    session = instance.session()
    with pytest.raises(StorageError) as caught:
        session.execute("CHECKPOINT")
    assert status_of(caught.value) == 503
    assert "checkpoint" in caught.value.message and "CHECKPOINT again" in caught.value.message
    assert files_of_demo() == before  # no temporary file left
    files.failing = False
    assert session.execute("INSERT INTO t VALUES (2)").count == 1  # the log still writes
    assert (session.execute("CHECKPOINT").message or "").startswith("checkpoint written")
    session.close()
    instance.close()
    with reopened(tmp_path) as again:
        session = again.session()
        assert session.execute("SELECT id FROM t").rows == [(1,), (2,)]
        session.close()

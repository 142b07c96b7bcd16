"""A power loss at every fsync of a log that writes zeros ahead of its end: reopening keeps
every acknowledged record and no part of one that was not.

A log (zeros written ahead in the leader's thread, so that every moment comes in a fixed
order) takes records of random sizes, some waited for one by one and some in groups, on a
`PowerLossFiles` (tests/engine/disk_faults.py), which keeps what each file and folder held at
its last fsync. Before every fsync, two images of the disk are taken: what a power loss
leaves (writes since the last fsync gone), and the same with some 512-byte sectors of the
last segment's unsynced write reaching the disk (a torn write over the zeros): those up to
some sector, or any of them, a later one kept where an earlier one is not. Each image must
open, cutting at most a torn tail, and hold exactly a prefix of the records appended that
holds every record acknowledged before the moment; opened again, it has nothing more to cut.
`-m long` runs many more cases (`tools/` runs the long forms).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from refimpl.engine.storage.wal import WriteAheadLog
from refimpl.engine.storage.wal_zeros import ZeroPlan
from tests.engine.disk_faults import PowerLossFiles
from tests.engine.wal_files import payload_of

_SECTOR = 512


def _torn(image_log: Path, live_log: Path, chooser: random.Random) -> None:
    """The last segment of `image_log` with some sectors of the live file's unsynced write:
    those up to a random sector, or a random choice of them (sectors of one write reach the
    disk in any order); those left out hold what they held at the last fsync (zeros past
    the durable end, where the file system extended the file)."""
    live = sorted(live_log.glob("*.wal"))
    if not live or not (image_log / live[-1].name).exists():
        return  # its name is not durable yet: a power loss leaves no such file
    current = live[-1].read_bytes()
    target = image_log / live[-1].name
    durable = target.read_bytes()
    if chooser.random() < 0.5:
        cut = chooser.randint(0, len(current) // _SECTOR + 1) * _SECTOR
        target.write_bytes(current[:cut] + durable[cut:])
        return
    image = bytearray(durable)
    for start in range(0, len(current), _SECTOR):
        sector = current[start : start + _SECTOR]
        if sector != durable[start : start + _SECTOR] and chooser.random() < 0.5:
            image.extend(bytes(max(0, start - len(image))))
            image[start : start + len(sector)] = sector
    target.write_bytes(bytes(image))


def _check(image_log: Path, appended: list[bytes], acknowledged: int) -> None:
    with WriteAheadLog(image_log, zeros=None) as log:
        records = [payload for _, payload in log.read(0)]
    assert records == appended[: len(records)], "a record not as appended"
    assert len(records) >= acknowledged, "an acknowledged record lost"
    with WriteAheadLog(image_log, zeros=None) as log:
        assert log.recovery_messages == []
        assert log.last_lsn == len(records)


def run_power_losses(
    root: Path, groups: list[list[int]], segment_bytes: int, plan: ZeroPlan, seed: int
) -> int:
    """Runs the workload, checking each power-loss image; returns how many were checked."""
    chooser = random.Random(seed)
    appended: list[bytes] = []
    acknowledged = 0
    images: list[tuple[Path, int, int]] = []  # (image's log folder, acknowledged, appended)
    live_log = root / "disk" / "log"

    def before_sync() -> None:
        image = root / f"image-{len(images)}"
        files.image(image)
        torn = root / f"torn-{len(images)}"
        files.image(torn)
        _torn(torn / "log", live_log, chooser)
        images.append((image / "log", acknowledged, len(appended)))
        images.append((torn / "log", acknowledged, len(appended)))

    (root / "disk").mkdir()
    files = PowerLossFiles(root / "disk", before_sync)
    files.sync_directory(root / "disk")
    log = WriteAheadLog(live_log, segment_bytes=segment_bytes, files=files, zeros=plan)
    for group in groups:
        for size in group:
            appended.append(payload_of(len(appended) + 1, size))
            log.append(appended[-1])
        log.wait_durable(len(appended))
        acknowledged = len(appended)
    log.close()
    for image_log, acked, _count in images:
        if image_log.exists():
            _check(image_log, appended, acked)
        else:
            assert acked == 0, "the log's folder is gone, yet a record was acknowledged"
    return len(images)


_groups = st.lists(st.lists(st.integers(0, 1500), min_size=1, max_size=4), max_size=14)
_plans = st.builds(
    ZeroPlan,
    after=st.sampled_from([0, 1000]),
    chunk=st.sampled_from([512, 3000, 8192]),
    ahead=st.sampled_from([0, 1024, 4096]),
    background=st.just(False),
)


def _case(groups: list[list[int]], segment_bytes: int, plan: ZeroPlan, seed: int) -> None:
    with tempfile.TemporaryDirectory() as folder:
        run_power_losses(Path(folder), groups, segment_bytes, plan, seed)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_groups, st.sampled_from([2000, 6000, 1 << 20]), _plans, st.integers(0, 1 << 30))
def test_a_power_loss_at_every_fsync_keeps_exactly_the_acknowledged_prefix(
    groups: list[list[int]], segment_bytes: int, plan: ZeroPlan, seed: int
) -> None:
    _case(groups, segment_bytes, plan, seed)


@pytest.mark.long
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_groups, st.sampled_from([2000, 6000, 1 << 20]), _plans, st.integers(0, 1 << 30))
def test_a_power_loss_at_every_fsync_keeps_exactly_the_acknowledged_prefix_long(
    groups: list[list[int]], segment_bytes: int, plan: ZeroPlan, seed: int
) -> None:
    _case(groups, segment_bytes, plan, seed)


def test_a_fixed_workload_checks_its_images(tmp_path: Path) -> None:
    plan = ZeroPlan(after=0, chunk=3000, ahead=1024, background=False)
    groups = [[700], [1500, 10], [900], [1200, 1200], [30]] * 3
    assert run_power_losses(tmp_path, groups, 6000, plan, seed=1) > 40

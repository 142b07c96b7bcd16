"""A power loss at every fsync of the workload: a restart shows exactly what was acknowledged.

The workload of `disk_faults.STEPS` runs once on a `PowerLossFiles`, which keeps what each
file held at its last fsync and which names each folder held at its last fsync. Before every
fsync (of a file or a folder) it writes a copy of what a power loss at that moment would leave:
writes not yet fsync'd are gone, and so are files created, renamed or removed since their
folder's last fsync. Each copy is then opened as a restart would: it must open (a torn tail is
cut back, never damage), and it must show every change acknowledged before the moment, none of
a step not begun, and the step running at that moment either made or not made.
"""

from __future__ import annotations

from pathlib import Path

from refimpl.engine.instance import Instance
from refimpl.engine.options import EngineOptions
from tests.engine.disk_faults import (
    STEPS,
    PowerLossFiles,
    Step,
    assert_one_of,
    observe,
    possible_states,
    reopened,
    run_step,
)


class Moments:
    """The copies taken before each fsync, with the steps acknowledged by then."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.acked: list[Step] = []
        self.running: Step | None = None
        self.taken: list[tuple[Path, list[Step], Step | None]] = []
        self.files = PowerLossFiles(folder / "data", self.before_sync)

    def before_sync(self) -> None:
        copy = self.folder / f"lost-power-{len(self.taken) + 1}"
        self.files.image(copy)
        self.taken.append((copy, list(self.acked), self.running))


def test_a_power_loss_at_every_fsync_recovers_what_was_acknowledged(tmp_path):
    moments = Moments(tmp_path)
    tokens: dict[str, str] = {}
    instance = Instance.open(tmp_path / "data", EngineOptions(), moments.files)
    try:
        for step in STEPS:
            moments.running = step
            run_step(instance, step, tokens)
            moments.acked.append(step)
            moments.running = None
    finally:
        instance.close()
    assert len(moments.taken) > 20  # every step's syncs, and the open's
    for copy, acked, running in moments.taken:
        done = [(step, True) for step in acked]
        if running is not None:
            done.append((running, False))  # a step cut by the power loss: either way
        with reopened(copy) as again:
            context = f"power lost at {copy.name}, during {running.sql if running else 'open'}"
            assert_one_of(observe(again, tokens), possible_states(done), context)

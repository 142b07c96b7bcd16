"""Progress of recovery and of `refimpl check`: the engine's reports, and how they are shown."""

from __future__ import annotations

from pathlib import Path

import refimpl
from refimpl.commands.progress import ProgressView
from refimpl.engine.instance import Instance, check_data
from refimpl.engine.progress import Progress


def make_folder(path: Path, commits: int) -> None:
    with refimpl.connect(path) as db:
        db.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        for n in range(commits):
            db.execute(f"INSERT INTO t VALUES ({n})")


def test_recovery_reports_every_record_replayed(tmp_path: Path) -> None:
    make_folder(tmp_path / "data", 20)
    seen: list[Progress] = []
    instance = Instance.open(tmp_path / "data", progress=seen.append)
    instance.close()
    mine = [p for p in seen if p.task == "recovering database 'demo'"]
    assert mine[-1] == Progress("recovering database 'demo'", 21, 21, "records")


def test_check_reports_the_bytes_it_read(tmp_path: Path) -> None:
    make_folder(tmp_path / "data", 5)
    seen: list[Progress] = []
    report, ok = check_data(tmp_path / "data", progress=seen.append)
    assert ok, report
    assert seen and seen[-1].done == seen[-1].total > 0
    assert [p.done for p in seen] == sorted(p.done for p in seen)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_nothing_is_shown_for_quick_work_then_a_line_a_second() -> None:
    clock = Clock()
    lines: list[str] = []
    view = ProgressView(line=lines.append, after=1.0, every=1.0, clock=clock)
    view(Progress("recovering database 'demo'", 10, 100, "records"))
    clock.now = 0.9
    view(Progress("recovering database 'demo'", 20, 100, "records"))
    assert lines == []  # under a second: nothing
    clock.now = 1.2
    view(Progress("recovering database 'demo'", 30, 100, "records"))
    clock.now = 1.5
    view(Progress("recovering database 'demo'", 40, 100, "records"))  # too soon again
    clock.now = 2.3
    view(Progress("recovering database 'demo'", 50, 100, "records"))
    clock.now = 2.4
    view(Progress("recovering database 'demo'", 100, 100, "records"))  # the end is told
    assert lines == [
        "recovering database 'demo': 30 of 100 records (30%)",
        "recovering database 'demo': 50 of 100 records (50%)",
        "recovering database 'demo': 100 of 100 records (100%)",
    ]

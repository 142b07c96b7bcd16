"""tools/bench/opcode_stages.py, the per-request budget's stages: every file a stage names is
one of the package's (or the benches', or the standard library's threading.py), named by
one stage only, so that a moved or renamed module shows here instead of silently turning
its opcodes into "other"; the sums by stage keep every opcode."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import ModuleType

from tests.tools.bench_modules import load_bench

ROOT = Path(__file__).resolve().parents[2]


def _stages() -> ModuleType:
    return load_bench("opcode_stages")


def test_each_file_named_is_there_and_in_one_stage() -> None:
    stages = _stages()
    known = {p.name for p in (ROOT / "refimpl").rglob("*.py")}
    known |= {p.name for p in (ROOT / "tools/bench").glob("*.py")}
    known.add(Path(threading.__file__).name)
    named = [file for _, files in stages.STAGES for file in files]
    assert sorted(set(named) - known) == []
    assert len(named) == len(set(named))


def test_the_sums_by_stage_keep_every_opcode() -> None:
    stages = _stages()
    counts = [("wal.py", 10.0), ("session.py", 5.0), ("wal.py", 2.5), ("<string>", 1.0)]
    summed = stages.by_stage(counts)
    assert summed == {
        stages.stage_of("wal.py"): 12.5,
        stages.stage_of("session.py"): 5.0,
        stages.OTHER: 1.0,
    }
    assert list(summed.values()) == sorted(summed.values(), reverse=True)


def _inner() -> int:
    total = 0
    for n in range(3):
        total += n
    return total


def _outer() -> int:
    return _inner() + _inner()


def test_opcodes_by_function_counts_each_function_of_the_run_by_its_own() -> None:
    stages = _stages()
    once = stages.opcodes_by_function(_inner)
    twice = stages.opcodes_by_function(_outer)
    here = Path(__file__).name
    assert set(once) == {("_inner", here)}
    assert twice[("_inner", here)] == 2 * once[("_inner", here)] > 0
    assert set(twice) == {("_inner", here), ("_outer", here)}
    assert sys.gettrace() is None

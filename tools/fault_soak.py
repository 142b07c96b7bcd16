"""Fault soak: every file operation of the fault workload failed in turn, and a power loss at
every fsync, each followed by a restart checked against the model of what was acknowledged.

Runs the long form of `tests/engine/test_faults.py` and `tests/engine/test_power_loss.py`
(see there for what each run checks) and prints the figures: file operations in the
workload, runs per fault kind, steps acknowledged and failed, restarts checked, power-loss
moments checked.

    python tools/fault_soak.py [--keep DIR]

Exits 1 (with the assertion) when a check fails; the data folder is then kept for a look.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engine.disk_faults import (  # noqa: E402
    KINDS,
    FaultyFiles,
    assert_one_of,
    check_power_loss_at_every_fsync,
    count_operations,
    observe,
    possible_states,
    reopened,
    run_workload,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="use DIR for the data folders and keep them")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # each failed checkpoint tidy-up would log a warning
    folder = args.keep or Path(tempfile.mkdtemp(prefix="kdb-fault-soak-"))
    started = time.perf_counter()
    figures: Counter[str] = Counter()
    try:
        operations = count_operations(folder / "count")
        print(f"{operations} file operations in the workload")
        for kind in KINDS:
            for fail_at in range(1, operations + 1):
                data = folder / f"{kind.replace(' ', '-')}-{fail_at}"
                files = FaultyFiles(fail_at, kind)
                done, tokens = run_workload(data, files)
                with reopened(data) as instance:
                    context = f"{kind} at operation {fail_at} ({files.failed})"
                    assert_one_of(observe(instance, tokens), possible_states(done), context)
                figures[f"{kind} runs"] += 1
                figures["steps acknowledged"] += sum(1 for _, acked in done if acked)
                figures["steps failed cleanly (4xx or 503)"] += sum(
                    1 for _, acked in done if not acked
                )
                figures["restarts checked"] += 1
                if args.keep is None:
                    shutil.rmtree(data)
        moments = folder / "power-loss"
        moments.mkdir()
        check_power_loss_at_every_fsync(moments)
        figures["power-loss moments checked"] = len(list(moments.glob("lost-power-*")))
    except AssertionError:
        traceback.print_exc()
        print(f"FAILED; the data folders are kept: {folder}")
        return 1
    for name, value in figures.items():
        print(f"{name}: {value}")
    print(f"all checks passed in {time.perf_counter() - started:.1f} s")
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Crash soak: hundreds of SIGKILLs of a committing writer, each followed by a full check.

Runs the long form of `tests/engine/test_crash.py` (see there for what each kill checks) and
prints the figures: kills (by kind), kills during an explicit CHECKPOINT, commits acknowledged
and verified, unacknowledged commits found durable, torn tails written and cut by recovery.

    python tools/crash_soak.py [--kills 300] [--seconds 1800] [--seed 2] [--threads 1]
                               [--keep DIR]

Exits 1 (with the assertion) when a check fails; the data folder is then kept for a look.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.engine.crash_run import CrashRun  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=1800.0, help="stop after this long")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="writer threads (group commit)")
    parser.add_argument("--keep", type=Path, help="use DIR as the data folder and keep it")
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="kdb-crash-soak-"))
    path = folder / "data"
    run = CrashRun(path, args.seed, threads=args.threads)
    failed = False
    try:
        try:
            run.run(args.kills, args.seconds)
            run.check_all_markers()
        except AssertionError:
            failed = True
            traceback.print_exc()
    finally:
        run.close()
    for line in run.stats.lines():
        print(line)
    if failed:
        print(f"FAILED; the data folder is kept: {path}")
        return 1
    if args.keep is None:
        shutil.rmtree(folder, ignore_errors=True)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

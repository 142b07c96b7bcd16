"""The checked-in spec/examples/*.json match the examples written in spec/*.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_extracted_examples_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "extract_examples.py"), "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr

"""`run.py` speaks the PostgreSQL protocol by itself when the examples it runs have `pg` steps.

Without `--pg` the runner skips every example with a `pg` step, so a deviation that only
such an example catches would be counted as surviving.
"""

from __future__ import annotations

import json
from pathlib import Path

from tools.mutation.catalogue import Deviation
from tools.mutation.run import EXAMPLES, RunSettings, needs_pg


def _chapter(root: Path, name: str, steps: list[dict[str, object]]) -> None:
    folder = root / EXAMPLES
    folder.mkdir(parents=True, exist_ok=True)
    document = {"chapter": name, "examples": [{"id": f"{name}-x", "steps": steps}]}
    (folder / f"{name}.json").write_text(json.dumps(document), encoding="utf-8")


def _deviation(chapter: str) -> Deviation:
    return Deviation(f"{chapter}-d", chapter, "b", "refimpl/x.py", "a", "b")


def test_pg_is_on_exactly_when_a_chapter_run_has_pg_steps(tmp_path: Path) -> None:
    _chapter(tmp_path, "proto", [{"request": {"sql": "SELECT 1"}}, {"pg": {"send": []}}])
    _chapter(tmp_path, "http", [{"request": {"sql": "SELECT 1"}}])
    own = RunSettings(own_chapter=True, root=tmp_path)
    assert needs_pg([_deviation("proto")], own)
    assert not needs_pg([_deviation("http")], own)
    assert needs_pg([_deviation("http"), _deviation("proto")], own)
    # Against the whole suite every chapter runs, the one with pg steps too.
    assert needs_pg([_deviation("http")], RunSettings(root=tmp_path))


def test_the_projects_own_chapters() -> None:
    own = RunSettings(own_chapter=True)
    assert needs_pg([_deviation("pgwire")], own)
    assert needs_pg([_deviation("operations")], own)  # ops-metrics-pg
    assert not needs_pg([_deviation("changes")], own)

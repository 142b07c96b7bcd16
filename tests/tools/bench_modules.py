"""A benchmark of tools/bench loaded as a module, for the tests of its pure parts (the
benchmarks themselves are run by hand, not here)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tools" / "bench"


def load_bench(name: str) -> ModuleType:
    """tools/bench/`name`.py, loaded by its path, its own imports found as when it runs: in
    its folder first (the benchmarks import each other by bare name). The folder leaves the
    path after the load: its copy.py and http.py would otherwise shadow the standard
    library's for everything imported later."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(BENCH))
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module

"""What a bench run in process imports: the checkout's refimpl, never this folder's shadows.

This folder's copy.py and http.py would shadow the standard library's modules, and a script
run from here has this folder first on `sys.path`. A script imports this module first, by
its bare name (while its folder is still on the path), and its other imports after an
`# isort: split`; importing it takes this folder off the path and puts the checkout's root
at its end, so the checkout's refimpl is imported unless PYTHONPATH names another. The
folder's other modules are then loaded by their path (`sibling`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.append(str(HERE.parent.parent))


def sibling(name: str) -> ModuleType:
    """The module `name` of this folder (`name.py`), loaded by its path and run once more
    for each caller: loaders do not share it through `sys.modules`."""
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

"""The package's shape: no import cycles, the layers import only downwards, small modules;
and the same of the scripts in tools/ where it fits them (small modules, no import cycles),
each folder of modules saying what it is for.

Imports are read from the source with `ast`, never executed, so every import counts: those
under `if TYPE_CHECKING:` and those inside functions too (a cycle hidden in a function or a
type hint is still a knot a reader has to untie). A parent package's `__init__` is not counted
as imported by its submodules: Python runs it, but counting it would make `refimpl/__init__.py`
(the embedded API, which imports the engine) a member of every cycle.
"""

from __future__ import annotations

import ast
import itertools
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "refimpl"

MAX_LINES = 600

# Modules allowed over MAX_LINES, each with its reason; an entry no longer needed fails too.
OVERSIZED_ALLOWED: dict[str, str] = {}
# The same for tools/ (paths from the repository: tools/bench/x.py).
TOOLS_OVERSIZED_ALLOWED: dict[str, str] = {}

_ENGINE = "refimpl.engine"
_LEAVES = (
    "refimpl.engine.options",
    "refimpl.engine.result",
    "refimpl.engine.admission",
    "refimpl.engine.rights",
    "refimpl.engine.files",
    "refimpl.engine.measures",
    "refimpl.engine.progress",
)
_TRACKING = "refimpl.engine.tracking"
_STORAGE = "refimpl.engine.storage"
_QUERY = "refimpl.engine.query"
_STATEMENTS = "refimpl.engine.statements"
_FEATURES = "refimpl.engine.features"
_ENGINE_TOP = (
    "refimpl.engine.access",
    "refimpl.engine.session",
    "refimpl.engine.instance",
    "refimpl.engine.feeds",
    "refimpl.engine.event_streams",
    "refimpl.engine.copying",
    "refimpl.engine.replication",
)
_PROTOCOLS = ("refimpl.http", "refimpl.pgwire", "refimpl.waiting")

# Package or module -> what it must not import (a name covers its submodules). Bottom to top:
# engine-root leaves < tracking < storage < query < statements < features
# < access/session/instance/feeds < http and pgwire; waiting sits under both.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # The one exception hierarchy, raised by every layer, so it stands under all of them.
    "refimpl.errors": ("refimpl",),
    **{leaf: (_ENGINE, *_PROTOCOLS) for leaf in _LEAVES},
    _TRACKING: (_STORAGE, _QUERY, _STATEMENTS, _FEATURES, *_ENGINE_TOP, *_PROTOCOLS),
    _STORAGE: (_QUERY, _STATEMENTS, _FEATURES, *_ENGINE_TOP, *_PROTOCOLS),
    _QUERY: (_STATEMENTS, _FEATURES, *_ENGINE_TOP, *_PROTOCOLS),
    _STATEMENTS: (_FEATURES, *_ENGINE_TOP, *_PROTOCOLS),
    _FEATURES: (*_ENGINE_TOP, *_PROTOCOLS),
    _ENGINE: _PROTOCOLS,
    "refimpl.waiting": ("refimpl.http", "refimpl.pgwire"),
    "refimpl.sql": (_ENGINE, *_PROTOCOLS),
    # A client of a server's HTTP API, like the conformance suite: no engine, SQL or server.
    "refimpl.sqllogictest": (
        "refimpl.engine",
        "refimpl.sql",
        "refimpl.errors",
        "refimpl.cli",
        "refimpl.settings",
        *_PROTOCOLS,
    ),
    # Connection counts shared by both protocols' servers: under both, above nothing.
    "refimpl.netlimits": ("refimpl",),
    # What the server asks of the C library's allocator, at its start: above nothing.
    "refimpl.native_memory": ("refimpl",),
    # The workers both servers run on: they know the engine's admission seam, nothing more.
    "refimpl.netpool": (
        "refimpl.sql",
        "refimpl.waiting",
        "refimpl.http",
        "refimpl.pgwire",
        _TRACKING,
        _STORAGE,
        _QUERY,
        _STATEMENTS,
        _FEATURES,
        *_ENGINE_TOP,
    ),
    # The two protocols stand side by side, and wait for the disk through the same package.
    "refimpl.pgwire": ("refimpl.http",),
    "refimpl.http": ("refimpl.pgwire",),
    # A client like any other: the embedded API (`refimpl.connect`) or HTTP, nothing inside;
    # it cuts statements with the project's parser (`refimpl.sql`), as the server does.
    "refimpl.shell": (_ENGINE, *_PROTOCOLS),
}


@dataclass(frozen=True)
class Import:
    """One import statement's edge: `source` imports `target`, at `path`:`line`."""

    source: str
    target: str
    path: str
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


# --- reading the imports ---------------------------------------------------------------------


def module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package folder `root`."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    """The module of the tree that `name` names: itself, else its longest known prefix."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _imported_names(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: Mapping[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        # `from . import x` in a/b/c.py means a.b; in a/b/__init__.py it means a.b itself.
        package = module if is_package else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    # `from pkg import name` imports the submodule pkg.name when there is one, else pkg.
    return [
        f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
        for alias in node.names
    ]


@dataclass(frozen=True)
class ImportGraph:
    modules: dict[str, Path]
    edges: list[Import]

    def __repr__(self) -> str:
        # pytest shows a failing test's arguments; thousands of edges would bury the message.
        return f"ImportGraph({len(self.modules)} modules, {len(self.edges)} imports)"


def read_imports(root: Path) -> ImportGraph:
    """The modules under `root` and every import between them, at any depth of the code."""
    return imports_between(module_files(root), root.parent)


def script_modules(folder: Path) -> dict[str, Path]:
    """Module name -> file of a folder of scripts run from it: the folder is first on their
    path, so they import each other by their bare names (each .py by its stem, a package in
    it by its dotted names). A name of the standard library is left out: the scripts reach a
    file of theirs that shadows one (tools/bench's http.py) by its path, never by that name."""
    modules = {path.stem: path for path in sorted(folder.glob("*.py"))}
    for init in sorted(folder.glob("*/__init__.py")):
        modules.update(module_files(init.parent))
    return {
        name: path
        for name, path in modules.items()
        if name.partition(".")[0] not in sys.stdlib_module_names
    }


def imports_between(modules: dict[str, Path], base: Path) -> ImportGraph:
    """Every import between `modules` (their paths shown from `base`), at any depth."""
    edges = []
    for module, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported_names(node, module, is_package, modules):
                target = _resolve(name, modules)
                if target is not None and target != module:
                    edges.append(
                        Import(module, target, path.relative_to(base).as_posix(), node.lineno)
                    )
    return ImportGraph(modules, edges)


# --- cycles -------------------------------------------------------------------------------------


def find_cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """For every module on a cycle, one shortest cycle through it (the same cycle found from
    two of its modules is listed once): the modules in import order, the first repeated at the
    end, starting from the cycle's smallest name; sorted."""
    graph: dict[str, set[str]] = {}
    for source, target in edges:
        graph.setdefault(source, set()).add(target)
        graph.setdefault(target, set())
    cycles = set()
    for component in _components(graph):
        if len(component) < 2:
            continue
        for start in component:
            cycle = _shortest_cycle(start, graph, component)[:-1]
            first = cycle.index(min(cycle))
            cycles.add((*cycle[first:], *cycle[:first], min(cycle)))
    return sorted(list(cycle) for cycle in cycles)


def _components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def _shortest_cycle(start: str, graph: Mapping[str, set[str]], within: set[str]) -> list[str]:
    """Breadth-first from `start` back to itself, staying inside its component."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & within):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a component but on no cycle")


def describe_cycle(cycle: list[str], edges: Iterable[Import]) -> str:
    first: dict[tuple[str, str], Import] = {}
    for edge in edges:
        first.setdefault((edge.source, edge.target), edge)
    steps = [f"  {a} -> {b}  ({first[a, b].where()})" for a, b in itertools.pairwise(cycle)]
    return " -> ".join(cycle) + "\n" + "\n".join(steps)


# --- layers and sizes ---------------------------------------------------------------------------


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layer_breaks(
    edges: Iterable[Import], forbidden: Mapping[str, Iterable[str]], rule: str
) -> list[Import]:
    """The imports out of package or module `rule` into what `forbidden[rule]` names."""
    banned = tuple(forbidden[rule])
    return [
        edge
        for edge in edges
        if _within(edge.source, rule)
        and not _within(edge.target, rule)
        and any(_within(edge.target, name) for name in banned)
    ]


def oversized(root: Path, limit: int) -> dict[str, int]:
    """Path (from the package's parent folder) -> line count, of modules over `limit`."""
    sizes = {}
    for path in sorted(root.rglob("*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > limit:
            sizes[path.relative_to(root.parent).as_posix()] = lines
    return sizes


# The engine knows no HTTP: a route or a header name in its code (docstrings aside) is a
# place where it speaks for a protocol layer, which should name its own routes and headers.
HTTP_WORDS = (
    "/api/",
    "/stream/",
    "Last-Event-ID",
    "Retry-After",
    "Content-Type",
    "Cache-Control",
    "WWW-Authenticate",
    "X-Accel-Buffering",
)
# Engine modules allowed to name a route anyway: none. A sentence the spec words with a route
# (SUBSCRIBE's errors) is raised as a typed error and worded by the layer above.
HTTP_WORDS_ALLOWED: set[str] = set()


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the docstring nodes of a module and of its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            value = body[0].value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.add(id(value))
    return found


def http_words(root: Path, words: Iterable[str] = HTTP_WORDS) -> dict[str, list[str]]:
    """Path (from the package's parent folder) -> `line: word` of each string of the code
    (not a docstring; a part of an f-string too) that holds one of `words`."""
    words = tuple(words)
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        hits = sorted(
            (node.lineno, word)
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            if id(node) not in skip
            for word in words
            if word in node.value
        )
        if hits:
            where = path.relative_to(root.parent).as_posix()
            found[where] = [f"{line}: {word}" for line, word in hits]
    return found


# A test module is run, not used: what two test modules share lives in a support module (or a
# conftest), so importing one never runs, collects or fixes another's tests, and a script in
# tools/ that reuses a test's workload takes it from the same support module.
TEST_ROOT = Path(__file__).resolve().parent
TOOLS_ROOT = TEST_ROOT.parent / "tools"


def _is_test_module(dotted: str) -> bool:
    return dotted.rpartition(".")[2].startswith("test_")


def imports_of_test_modules(paths: Iterable[Path], base: Path) -> list[str]:
    """`path:line imports name` (path from `base`) for each import of a module named
    `test_*` (`import test_x`, `from tests.a.test_x import f`, `from tests.a import test_x`,
    `from . import test_x`) in `paths`."""
    found = []
    for path in sorted(paths):
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue  # removed since it was listed (a scratch file of a running tool)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                # `from tests.a.test_x import test_f` is one import of test_x, not two.
                module = node.module or ""
                names = (
                    [module]
                    if _is_test_module(module)
                    else [f"{module}.{alias.name}".lstrip(".") for alias in node.names]
                )
            else:
                continue
            where = path.relative_to(base).as_posix()
            found += [f"{where}:{node.lineno} imports {n}" for n in names if _is_test_module(n)]
    return found


# --- what each folder is for ---------------------------------------------------------------------


def unexplained_folders(root: Path) -> list[str]:
    """The folders under `root`, itself included (paths from its parent), that hold Python
    modules and say nowhere what they are for: neither a README.md nor an `__init__.py` with a
    docstring."""
    found = []
    for folder in sorted({path.parent for path in root.rglob("*.py")}):
        if (folder / "README.md").is_file():
            continue
        init = folder / "__init__.py"
        if init.is_file() and ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))):
            continue
        found.append(folder.relative_to(root.parent).as_posix())
    return found


def assert_no_cycles(graph: ImportGraph) -> None:
    cycles = find_cycles((edge.source, edge.target) for edge in graph.edges)
    assert not cycles, "import cycles:\n" + "\n".join(
        describe_cycle(cycle, graph.edges) for cycle in cycles
    )


def assert_small(root: Path, allowed: Mapping[str, str], allowed_name: str) -> None:
    """No module under `root` over MAX_LINES but those `allowed` (named `allowed_name`), each
    of which still is."""
    sizes = oversized(root, MAX_LINES)
    too_big = {path: lines for path, lines in sizes.items() if path not in allowed}
    assert not too_big, f"modules over {MAX_LINES} lines:\n" + "\n".join(
        f"  {path}: {lines} lines" for path, lines in too_big.items()
    )
    stale = sorted(set(allowed) - set(sizes))
    assert not stale, f"allowed to be big but no longer are, drop from {allowed_name}: {stale}"


# --- the tests of the package -------------------------------------------------------------------


@pytest.fixture(scope="module")
def package_imports() -> ImportGraph:
    return read_imports(PACKAGE_ROOT)


def test_no_import_cycles(package_imports):
    assert_no_cycles(package_imports)


@pytest.mark.parametrize("rule", FORBIDDEN)
def test_layer_rule(rule, package_imports):
    # A rule about a renamed or removed package would pass forever without this.
    present = any(_within(module, rule) for module in package_imports.modules)
    assert present, f"{rule} is not in the tree"
    breaks = layer_breaks(package_imports.edges, FORBIDDEN, rule)
    assert not breaks, f"{rule} must not import {', '.join(FORBIDDEN[rule])}:\n" + "\n".join(
        f"  {edge.where()}: {edge.source} imports {edge.target}" for edge in breaks
    )


def test_modules_are_small():
    assert_small(PACKAGE_ROOT, OVERSIZED_ALLOWED, "OVERSIZED_ALLOWED")


def test_the_engine_names_no_route_or_header():
    every = http_words(PACKAGE_ROOT)
    found = {path: lines for path, lines in every.items() if path.startswith("refimpl/engine/")}
    named = {path: lines for path, lines in found.items() if path not in HTTP_WORDS_ALLOWED}
    assert not named, "routes or header names in the engine (the protocol layer names them):\n" + (
        "\n".join(f"  {path}:{line}" for path, lines in named.items() for line in lines)
    )
    stale = sorted(HTTP_WORDS_ALLOWED - set(found))
    assert not stale, f"name no route any more, drop from HTTP_WORDS_ALLOWED: {stale}"


def test_no_test_module_is_imported():
    scripts = [*TEST_ROOT.rglob("*.py"), *TOOLS_ROOT.rglob("*.py")]
    found = imports_of_test_modules(scripts, TEST_ROOT.parent)
    assert not found, "test modules imported (move what is shared to a support module):\n" + (
        "\n".join(f"  {line}" for line in found)
    )


@pytest.mark.parametrize("root", [PACKAGE_ROOT, TOOLS_ROOT], ids=["refimpl", "tools"])
def test_each_folder_of_modules_says_what_it_is_for(root):
    found = unexplained_folders(root)
    assert not found, "folders with neither a README.md nor a docstring in __init__.py:\n" + (
        "\n".join(f"  {folder}" for folder in found)
    )


# --- the tests of tools/ -------------------------------------------------------------------------


def test_tools_modules_are_small():
    assert_small(TOOLS_ROOT, TOOLS_OVERSIZED_ALLOWED, "TOOLS_OVERSIZED_ALLOWED")


# tools/'s modules named from the repository (tools.mutation.run), and tools/bench's scripts,
# which import each other by their bare names.
TOOLS_GRAPHS = {
    "tools": lambda: read_imports(TOOLS_ROOT),
    "tools/bench": lambda: imports_between(script_modules(TOOLS_ROOT / "bench"), TEST_ROOT.parent),
}


@pytest.mark.parametrize("graph", TOOLS_GRAPHS)
def test_no_import_cycles_in_tools(graph):
    imports = TOOLS_GRAPHS[graph]()
    assert imports.edges, f"no import between the modules of {graph}: are they still there?"
    assert_no_cycles(imports)


# --- the checks can fail: a small synthetic package ---------------------------------------------


def _write_package(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


SYNTHETIC = {
    "pkg/__init__.py": "",
    "pkg/low/__init__.py": "",
    # a relative import of a submodule, a function-level import up and a type-only import
    # back: two cycles
    "pkg/low/a.py": "from . import b\n\ndef late():\n    from pkg.high import c\n",
    "pkg/low/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.low.a\n",
    "pkg/high/__init__.py": "",
    "pkg/high/c.py": "from ..low.a import late\nfrom pkg.low import b as _b\n",
    "pkg/high/d.py": "import os\nfrom pkg.high.c import late\n",
}


def test_imports_are_resolved_to_modules(tmp_path):
    edges = read_imports(_write_package(tmp_path, SYNTHETIC)).edges
    assert {(e.source, e.target) for e in edges} == {
        ("pkg.low.a", "pkg.low.b"),
        ("pkg.low.a", "pkg.high.c"),
        ("pkg.low.b", "pkg.low.a"),
        ("pkg.high.c", "pkg.low.a"),
        ("pkg.high.c", "pkg.low.b"),
        ("pkg.high.d", "pkg.high.c"),
    }


def test_cycles_are_found_type_only_and_late_imports_too(tmp_path):
    edges = read_imports(_write_package(tmp_path, SYNTHETIC)).edges
    cycles = find_cycles((edge.source, edge.target) for edge in edges)
    assert cycles == [
        ["pkg.high.c", "pkg.low.a", "pkg.high.c"],
        ["pkg.low.a", "pkg.low.b", "pkg.low.a"],
    ]
    assert "pkg.low.a -> pkg.high.c  (pkg/low/a.py:4)" in describe_cycle(cycles[0], edges)
    assert find_cycles([("x", "y"), ("y", "z")]) == []
    knots = [("x", "y"), ("y", "x"), ("y", "z"), ("z", "x"), ("p", "q"), ("q", "r"), ("r", "p")]
    assert find_cycles(knots) == [["p", "q", "r", "p"], ["x", "y", "x"], ["x", "y", "z", "x"]]


def test_layer_breaks_name_file_and_line(tmp_path):
    edges = read_imports(_write_package(tmp_path, SYNTHETIC)).edges
    forbidden = {"pkg.low": ("pkg.high",), "pkg.high.d": ("pkg.low",)}
    assert [e.where() for e in layer_breaks(edges, forbidden, "pkg.low")] == ["pkg/low/a.py:4"]
    assert layer_breaks(edges, forbidden, "pkg.high.d") == []


def test_oversized_names_module_and_size(tmp_path):
    root = _write_package(tmp_path, {"pkg/__init__.py": "", "pkg/big.py": "x = 1\n" * 7})
    assert oversized(root, 6) == {"pkg/big.py": 7}
    assert oversized(root, 7) == {}


def test_http_words_skip_docstrings_and_find_f_strings(tmp_path):
    module = (
        '"""Serves GET /api/x."""\n'
        "def f(n):\n"
        '    """Reads Last-Event-ID."""\n'
        '    return f"see /api/x?n={n}"\n'
        'HEADER = "Retry-After"\n'
    )
    root = _write_package(tmp_path, {"pkg/__init__.py": "", "pkg/m.py": module})
    assert http_words(root) == {"pkg/m.py": ["4: /api/", "5: Retry-After"]}


def test_test_module_imports_are_found_in_every_spelling(tmp_path):
    files = {
        "tests/test_a.py": "import test_b\nfrom tests.x.test_c import test_f, g\n",
        "tests/x/test_c.py": "from tests.x import test_d, support\nfrom . import test_e\n",
        "tests/x/support.py": "from tests.x.support_more import g\nimport tests.conftest\n",
    }
    _write_package(tmp_path, files)
    assert imports_of_test_modules(tmp_path.rglob("*.py"), tmp_path) == [
        "tests/test_a.py:1 imports test_b",
        "tests/test_a.py:2 imports tests.x.test_c",
        "tests/x/test_c.py:1 imports tests.x.test_d",
        "tests/x/test_c.py:2 imports test_e",
    ]


def test_scripts_import_each_other_by_bare_name_not_the_standard_librarys(tmp_path):
    files = {
        "a.py": "import b\nimport http.client\n",
        "b.py": "from pkg import c\n",
        "http.py": "import a\n",  # shadows the standard library's: reached by path only
        "pkg/__init__.py": "from pkg.c import f\n",
        "pkg/c.py": "import a\n\ndef f():\n    pass\n",
    }
    _write_package(tmp_path, files)
    graph = imports_between(script_modules(tmp_path), tmp_path)
    assert {(e.source, e.target) for e in graph.edges} == {
        ("a", "b"),
        ("b", "pkg.c"),
        ("pkg", "pkg.c"),
        ("pkg.c", "a"),
    }
    assert find_cycles((e.source, e.target) for e in graph.edges) == [["a", "b", "pkg.c", "a"]]


def test_a_folder_of_modules_says_what_it_is_for_in_a_readme_or_its_init(tmp_path):
    files = {
        "root/x.py": "",
        "root/told/__init__.py": '"""What this package is for."""\n',
        "root/told/m.py": "",
        "root/readme/README.md": "# What this folder is for\n",
        "root/readme/m.py": "",
        "root/silent/__init__.py": "# a comment is no docstring\n",
        "root/data/table.csv": "a,b\n",
    }
    _write_package(tmp_path, files)
    assert unexplained_folders(tmp_path / "root") == ["root", "root/silent"]

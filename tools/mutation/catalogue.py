"""The catalogue of deviations: what each breaks, and the exact edit that breaks it.

A deviation is one small, realistic bug another implementation could have: an off-by-one, a
wrong default, a missing check, a wrong field or status. Each names the spec chapter whose
behaviour it breaks, that behaviour in one sentence, and an edit of refimpl's code: a file
and a search text that must occur there exactly once, replaced by another text. The
catalogue is kept in step with the code: `check` fails loudly, naming the entry, when a
search text no longer matches (a test runs it on every entry).

Two kinds of entries are not counted in the figures, each with its reason written out:
`equivalent` (the edit changes no behaviour at all: no implementation could be told apart
by it) and `unobservable` (the behaviour is real but the API cannot show it; the chapter of
the spec says why).
"""

from __future__ import annotations

import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CATALOGUE = Path(__file__).resolve().parent / "catalogue.toml"
PACKAGE = "refimpl"
RUNNER = "conformance"
CHAPTERS = (
    "changes",
    "revisions",
    "subscribe",
    "users-and-rights",
    "sql",
    "types-and-values",
    "http-exec",
    "import-write",
    "errors",
    "settings",
    "stream",
    "changefeeds",
    "sources",
    "operations",
    "pgwire",
)
_ID = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_FIELDS = {"id", "chapter", "behaviour", "file", "search", "replace", "equivalent", "unobservable"}


class CatalogueError(ValueError):
    """The catalogue is malformed, or an entry's edit no longer applies to the code."""


@dataclass(frozen=True)
class Deviation:
    """One deliberate bug: `search` (exactly once in `file`) becomes `replace`."""

    id: str
    chapter: str
    behaviour: str
    file: str  # relative to the repository: refimpl/...
    search: str
    replace: str
    equivalent: str = ""  # why no behaviour changes (not counted)
    unobservable: str = ""  # why the API cannot show it (not counted; the spec says why)

    @property
    def counted(self) -> bool:
        """Whether the figures count it: it should be caught by the suite."""
        return not (self.equivalent or self.unobservable)


def load(path: Path = CATALOGUE) -> list[Deviation]:
    """Every deviation of the catalogue file, checked for form (not yet against the code)."""
    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogueError(f"{path.name}: {exc}") from None
    entries = document.get("deviation", [])
    if not isinstance(entries, list) or not entries:
        raise CatalogueError(f"{path.name} holds no [[deviation]] entries")
    seen: set[str] = set()
    deviations = []
    for number, entry in enumerate(entries, 1):
        deviation = _deviation(entry, f"{path.name}: entry {number}")
        if deviation.id in seen:
            raise CatalogueError(f"{path.name}: the id {deviation.id!r} is used twice")
        seen.add(deviation.id)
        deviations.append(deviation)
    return deviations


def _deviation(entry: object, where: str) -> Deviation:
    if not isinstance(entry, dict):
        raise CatalogueError(f"{where} is not a table")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise CatalogueError(f"{where} has unknown fields {sorted(unknown)}")
    for name in ("id", "chapter", "behaviour", "file", "search", "replace"):
        if not isinstance(entry.get(name), str) or not entry[name]:
            raise CatalogueError(f"{where} lacks the text field {name!r}")
    deviation = Deviation(**entry)
    where = f"{where} ({deviation.id})"
    if not _ID.match(deviation.id):
        raise CatalogueError(f"{where}: an id is lower-case words joined by hyphens")
    if deviation.chapter not in CHAPTERS:
        raise CatalogueError(f"{where}: chapter must be one of {', '.join(CHAPTERS)}")
    if not deviation.file.startswith(PACKAGE + "/"):
        raise CatalogueError(f"{where}: the file must be in {PACKAGE}/")
    if deviation.search == deviation.replace:
        raise CatalogueError(f"{where}: the replacement equals the search text")
    if deviation.equivalent and deviation.unobservable:
        raise CatalogueError(f"{where}: give either 'equivalent' or 'unobservable', not both")
    return deviation


def check(deviation: Deviation, root: Path = REPO) -> str:
    """The file's text with the edit made; CatalogueError when it does not apply once."""
    target = root / deviation.file
    if not target.is_file():
        raise CatalogueError(f"{deviation.id}: {deviation.file} does not exist")
    text = target.read_text(encoding="utf-8")
    found = text.count(deviation.search)
    if found != 1:
        how = "no longer occurs" if found == 0 else f"occurs {found} times"
        raise CatalogueError(
            f"{deviation.id}: the search text {how} in {deviation.file}; bring the entry in"
            " step with the code"
        )
    return text.replace(deviation.search, deviation.replace)


def mutated_copy(deviation: Deviation | None, destination: Path, root: Path = REPO) -> Path:
    """A copy of the package under `destination` with the deviation applied (None: as is).

    The checkout is never written. Returns the folder to put on PYTHONPATH. The suite's
    runner (`conformance`, which `refimpl --version` names) is linked in unchanged.
    """
    shutil.copytree(root / PACKAGE, destination / PACKAGE)
    (destination / RUNNER).symlink_to(root / RUNNER, target_is_directory=True)
    if deviation is not None:
        target = destination / deviation.file
        target.write_text(check(deviation, root), encoding="utf-8")
        # Its compiled copy would be trusted while the source's size and time match.
        for stale in (target.parent / "__pycache__").glob(f"{target.stem}.*.pyc"):
            stale.unlink()
    return destination

"""Which parts of the spec no example backs: sections and tables, per chapter.

    python tools/spec_coverage.py          # the uncovered parts; exit 1 when there are any
    python tools/spec_coverage.py --all    # every section, with the examples that back it

A chapter (`spec/*.md` but README.md) is cut into sections at its headings; a section's own
text runs from its heading to the next heading of any level. A section is **covered** when

- an example block (`sql-example`, `http-example`) is written in its own text, or
- its own text names examples written elsewhere: `<!-- examples: id-one, id-two -->`
  (each id must exist in some chapter), or
- it states why no example can show it: `<!-- no-example: <the reason> -->`, for what is
  not observable over the API (a reason must say something), or
- it has no text of its own (a heading right above its first subheading), or
- it or a section above it says why none of the sections from there down can have an
  example: `<!-- no-example below: <the reason> -->` (under a chapter's title: a chapter
  about another protocol than HTTP, which the case format does not speak; a part about
  command-line tools, which are not the API).

A table (a `|` header line, then a `|---|` line) is covered when its section is. Headings
and tables inside fenced blocks are not part of the structure.

`--rows` also lists, for information (it does not change the exit code), the rows of
tables whose first cell names something in code (a parameter, a setting, a function, an
event) that no example backing the section or its subsections mentions: a hint where an
example may be missing, with false alarms where a name is shown in other words.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.cases import EXAMPLE_KINDS, find_blocks, parse_info  # noqa: E402

SKIPPED_FILES = {"README.md"}
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_RULE_RE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_NO_EXAMPLE_RE = re.compile(r"<!--\s*no-example:(.*?)-->", re.DOTALL)
_NO_EXAMPLE_BELOW_RE = re.compile(r"<!--\s*no-example\s+below:(.*?)-->", re.DOTALL)
_EXAMPLES_RE = re.compile(r"<!--\s*examples:(.*?)-->", re.DOTALL)
_COMMENT_RE = re.compile(r"<!--.*?-->", re.DOTALL)
_ROW_NAME_RE = re.compile(r"^\|?\s*`([A-Za-z_][\w.]*)")


@dataclass
class Table:
    """A table of a section: its first line and its header row."""

    line: int
    header: str
    rows: list[tuple[int, str]] = field(default_factory=list)  # (line, the name in code)


@dataclass
class Section:
    """A heading and its own text (up to the next heading), with what backs it."""

    source: str
    heading: str
    level: int
    line: int
    end_line: int
    examples: list[str] = field(default_factory=list)
    subtree_examples: list[str] = field(default_factory=list)  # its subsections' too
    linked: list[str] = field(default_factory=list)
    reason: str = ""
    has_text: bool = False
    tables: list[Table] = field(default_factory=list)

    @property
    def covered(self) -> bool:
        """An example in it or named by it, a stated reason, or no text of its own."""
        return bool(self.examples or self.linked or self.reason or not self.has_text)


def chapter_sections(markdown: str, source: str) -> list[Section]:
    """The sections of one chapter, in order; text before the first heading is none."""
    lines = markdown.split("\n")
    fenced: set[int] = set()  # 1-based lines inside fences, the fences included
    examples_at: dict[int, str] = {}
    for block in find_blocks(markdown):
        fenced.update(range(block.fence_line, block.last_line + 2))
        lang, attrs = parse_info(block.info, f"{source}:{block.fence_line}")
        if lang in EXAMPLE_KINDS and attrs.get("id"):
            examples_at[block.fence_line] = attrs["id"]
    sections: list[Section] = []
    for number, line in enumerate(lines, 1):
        head = None if number in fenced else _HEADING_RE.match(line)
        if head:
            if sections:
                sections[-1].end_line = number - 1
            level = len(head.group(1))
            sections.append(Section(source, head.group(2), level, number, len(lines)))
    for section in sections:
        own = range(section.line + 1, section.end_line + 1)
        section.examples = [examples_at[n] for n in own if n in examples_at]
        text = "\n".join(lines[n - 1] for n in own if n not in fenced)
        for found in _NO_EXAMPLE_RE.finditer(text):
            section.reason = section.reason or " ".join(found.group(1).split())
        for found in _EXAMPLES_RE.finditer(text):
            section.linked.extend(i for i in re.split(r"[\s,]+", found.group(1)) if i)
        section.has_text = bool(_COMMENT_RE.sub("", text).strip()) or bool(
            any(n in fenced for n in own)
        )
        for n in own:
            if (
                n not in fenced
                and n < len(lines)
                and lines[n - 1].lstrip().startswith("|")
                and _TABLE_RULE_RE.match(lines[n])
            ):
                section.tables.append(_table(lines, n))
    for i, section in enumerate(sections):
        end = next((t.line for t in sections[i + 1 :] if t.level <= section.level), len(lines))
        section.subtree_examples = [ex for n, ex in examples_at.items() if section.line < n < end]
        own_text = "\n".join(lines[section.line : section.end_line])
        no_example = _NO_EXAMPLE_BELOW_RE.search(own_text)
        if no_example:
            reason = " ".join(no_example.group(1).split())
            for below in sections[i:]:
                if below.line >= end:
                    break
                below.reason = below.reason or f"(from '{section.heading}') {reason}"
    return sections


def _table(lines: list[str], first: int) -> Table:
    table = Table(first, lines[first - 1].strip())
    n = first + 2  # past the header and the rule
    while n <= len(lines) and lines[n - 1].lstrip().startswith("|"):
        found = _ROW_NAME_RE.match(lines[n - 1].strip())
        if found:
            table.rows.append((n, found.group(1)))
        n += 1
    return table


def example_texts(spec_dir: Path) -> dict[str, str]:
    """{example id: the text of its block} for every example of a spec folder."""
    texts: dict[str, str] = {}
    for path in sorted(p for p in spec_dir.glob("*.md") if p.name not in SKIPPED_FILES):
        for block in find_blocks(path.read_text(encoding="utf-8")):
            lang, attrs = parse_info(block.info, f"{path.name}:{block.fence_line}")
            if lang in EXAMPLE_KINDS and attrs.get("id"):
                texts[attrs["id"]] = block.text
    return texts


def unbacked_rows(sections: list[Section], texts: dict[str, str]) -> list[str]:
    """One line per table row whose name no example of its section (or subsections, or
    named by it) mentions; sections with a stated reason are left out."""
    found: list[str] = []
    for section in sections:
        if section.reason:
            continue
        backing = "\n".join(texts.get(ex, "") for ex in section.subtree_examples + section.linked)
        for table in section.tables:
            for line, name in table.rows:
                if name not in backing:
                    found.append(f"{section.source}:{line}: no example mentions {name!r}")
    return found


def spec_sections(spec_dir: Path) -> list[Section]:
    """The sections of every chapter of a spec folder, chapters sorted by name."""
    sections: list[Section] = []
    for path in sorted(p for p in spec_dir.glob("*.md") if p.name not in SKIPPED_FILES):
        try:
            source = path.relative_to(spec_dir.parent).as_posix()
        except ValueError:
            source = path.name
        sections.extend(chapter_sections(path.read_text(encoding="utf-8"), source))
    return sections


def problems(sections: list[Section]) -> list[str]:
    """One line per uncovered section, per table in it, and per linked id that is no
    example; [] when the spec is covered."""
    known = {ex for section in sections for ex in section.examples}
    found: list[str] = []
    for section in sections:
        where = f"{section.source}:{section.line}"
        for name in section.linked:
            if name not in known:
                found.append(f"{where}: '{section.heading}' names {name!r}, which is no example")
        if section.covered:
            continue
        found.append(f"{where}: section '{section.heading}' has no example and no reason")
        for table in section.tables:
            found.append(
                f"{section.source}:{table.line}: table {table.header[:60]!r} (in"
                f" '{section.heading}') has no example"
            )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "spec", help="the spec folder")
    parser.add_argument("--all", action="store_true", help="list every section")
    parser.add_argument(
        "--rows", action="store_true", help="also list table rows no example mentions"
    )
    args = parser.parse_args(argv)
    sections = spec_sections(args.spec.resolve())
    if args.all:
        for section in sections:
            backing = (
                ", ".join(section.examples + section.linked)
                or (f"no example: {section.reason}" if section.reason else "")
                or ("(no text of its own)" if not section.has_text else "UNCOVERED")
            )
            print(f"{section.source}:{section.line}: {section.heading}: {backing}")
    found = problems(sections)
    for line in found:
        print(line)
    if args.rows:
        for line in unbacked_rows(sections, example_texts(args.spec.resolve())):
            print(f"(row) {line}")
    chapters = len({s.source for s in sections})
    covered = sum(s.covered for s in sections)
    print(f"{covered} of {len(sections)} section(s) in {chapters} chapter(s) covered")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())

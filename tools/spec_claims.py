"""What each chapter states that no example pins: numbers, statuses, spellings and rights.

    python tools/spec_claims.py                       # per chapter: claims, pinned, unpinned
    python tools/spec_claims.py --chapter stream -v   # every claim of a chapter, with its pin
    python tools/spec_claims.py --check               # exit 1 for an unpinned claim that
                                                      # tools/spec_claims_gaps.txt does not list
    python tools/spec_claims.py --write-gaps          # write the gaps file anew (keeps reasons)

`tools/spec_coverage.py` asks whether each section has an example; this asks, per chapter,
whether the examples reach what the prose states. A **claim** is read from a chapter's
prose (not its fenced blocks, not its comments), and is one of

- `status`: an HTTP status the text names (`answers 429`, `a 410`); pinned when an example
  of the chapter expects that status;
- `sqlstate`: a SQLSTATE in backticks (`53300`); pinned when an example expects that `code`
  (or names it);
- `spelling`: a name in backticks that a client spells (a field, a parameter, a setting, a
  header, an event: `gone_before`, `Retry-After`, `stream_ticket_ttl_s`); pinned when the text
  of an example of the chapter holds it;
- `number`: a number the text states as a bound (`at most 200`, `(3)`, `1024 bytes`,
  `default 25`); pinned when an example holds it, and `edge` when it also holds the number
  one past it (or one before): the bound tested on both sides;
- `right`: a route or statement named in a sentence about rights (the admin, READ, WRITE,
  a right, 401, 403); pinned when an example of the chapter sends it as another user than
  the admin (a captured token).

The examples of a chapter are those written in it and those it names
(`<!-- examples: ... -->`). A claim is a hint, not a proof: a number may be pinned by an
example that holds it for another reason. Known gaps are listed in the gaps file, one a
line: `<chapter> <kind> <value>  # why`; `--check` fails for an unpinned claim not listed
there (a new sentence without an example), and names listed gaps that are pinned now.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.cases import (  # noqa: E402
    EXAMPLE_KINDS,
    CaseError,
    extract_chapter,
    find_blocks,
    parse_info,
)

GAPS = REPO / "tools" / "spec_claims_gaps.txt"
SKIPPED_FILES = {"README.md"}
KINDS = ("status", "sqlstate", "spelling", "number", "right")
# The statuses an API answers with; other three-digit numbers in prose are sizes and LSNs.
STATUSES = {200, 201, 204, 206, 304, 400, 401, 403, 404, 405, 406, 408, 409, 410, 411, 412}
STATUSES |= {413, 414, 415, 416, 422, 426, 429, 431, 500, 501, 503, 504}
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_STATUS = re.compile(r"(?<![\w.,/:#-])([1-5]\d\d)(?![\w.,/:-]|\s*(?:KB|MB|ms|s\b|bytes|rows))")
_SQLSTATE = re.compile(r"`([0-9][0-9A-Z]{4})`")
_SPELLING = re.compile(r"`([A-Za-z_][A-Za-z0-9_.-]*[A-Za-z0-9_])`")
_BOUND = re.compile(
    r"(?:at most|up to|more than|over|at least|fewer than|default|within|past|longer than)"
    r" `?(\d[\d,]*)`?|\((\d[\d,]*)\)|\b(\d[\d,]*) (?:UTF-8 )?(?:bytes|characters|rows|items"
    r"|seconds|ms|KB|MB|streams|tokens|pages|deep|decimal places)\b"
)
_RIGHT_WORDS = re.compile(r"\b(admin|READ|WRITE|rights?|401|403|GRANT|may not|refused)\b")
_ROUTE = re.compile(r"`(?:(?:GET|POST|PUT|DELETE) )?(/(?:api|stream|exec|exp|imp|write)[\w/]*)")
_STATEMENT = re.compile(r"`([A-Z]{3,}(?: [A-Z]{2,})?)\b")
_NOT_STATEMENTS = {"READ", "WRITE", "GRANT", "NULL", "JSON", "UTC", "CSV", "GET", "POST", "PUT"}
_NOT_STATEMENTS |= {"DELETE", "HTTP", "PUBLIC", "FATAL", "TLS"}
_SENTENCE_END = re.compile(r"(?<=[.;:])\s+(?=[A-Z`(])|\n\s*\n|\n\s*[-|]")


@dataclass(frozen=True)
class Claim:
    """One thing a chapter states, where, and what pins it."""

    chapter: str
    kind: str
    value: str
    line: int
    pinned_by: str = ""  # an example id, or "" when none
    edge: bool = False  # a number: the example also holds the number one past it

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.chapter, self.kind, self.value)


@dataclass
class Chapter:
    name: str
    prose: list[tuple[int, str]]  # (line, text) outside fences and comments
    examples: dict[str, str]  # id -> the example's text
    steps: dict[str, list[dict[str, Any]]]  # id -> the HTTP example's steps
    known_ids: frozenset[str] = frozenset()  # every example id of the spec


def read_chapters(spec: Path) -> dict[str, Chapter]:
    """Every chapter of a spec folder, with the examples it holds and names."""
    chapters: dict[str, Chapter] = {}
    texts: dict[str, str] = {}
    steps: dict[str, list[dict[str, Any]]] = {}
    linked: dict[str, list[str]] = {}
    for path in sorted(p for p in spec.glob("*.md") if p.name not in SKIPPED_FILES):
        markdown = path.read_text(encoding="utf-8")
        name = path.stem
        fenced: set[int] = set()
        own: list[str] = []
        for block in find_blocks(markdown):
            fenced.update(range(block.fence_line, block.last_line + 2))
            kind, attrs = parse_info(block.info, f"{path.name}:{block.fence_line}")
            if kind in EXAMPLE_KINDS and attrs.get("id"):
                texts[attrs["id"]] = block.text
                own.append(attrs["id"])
        try:
            document = extract_chapter(markdown, f"spec/{path.name}", "0.0.0")
        except CaseError as exc:  # tools/extract_examples.py --check reports it; read on
            print(f"warning: {exc}: its examples pin no rights here", file=sys.stderr)
            document = {"examples": []}
        for example in document["examples"]:
            steps[example["id"]] = example.get("steps", [])
        lines = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), markdown).split("\n")
        prose = [(n, t) for n, t in enumerate(lines, 1) if n not in fenced]
        names = re.findall(r"<!--\s*examples:(.*?)-->", markdown, re.DOTALL)
        linked[name] = [i for found in names for i in re.split(r"[\s,]+", found) if i]
        chapters[name] = Chapter(name, prose, {i: "" for i in own}, {})
    for chapter in chapters.values():
        chapter.known_ids = frozenset(texts)
        ids = [*chapter.examples, *linked[chapter.name]]
        chapter.examples = {i: texts[i] for i in ids if i in texts}
        chapter.steps = {i: steps.get(i, []) for i in chapter.examples}
    return chapters


def claims_of(chapter: Chapter) -> list[Claim]:
    """The claims of one chapter, each once (at its first line), with what pins it."""
    found: dict[tuple[str, str], int] = {}

    def note(kind: str, value: str, line: int) -> None:
        found.setdefault((kind, value), line)

    for line, text in chapter.prose:
        for m in _STATUS.finditer(text):
            if int(m.group(1)) in STATUSES and not text[: m.start()].rstrip().endswith("LSN"):
                note("status", m.group(1), line)
        for m in _SQLSTATE.finditer(text):
            note("sqlstate", m.group(1), line)
        for m in _SPELLING.finditer(text):
            word = m.group(1)
            # An example's id named in the text is a reference, not a spelling of the API.
            if len(word) >= 3 and not word.isupper() and word not in chapter.known_ids:
                note("spelling", word, line)
        for m in _BOUND.finditer(text):
            number = next(g for g in m.groups() if g).replace(",", "")
            if int(number) >= 2:
                note("number", number, line)
    for line, sentence in _sentences(chapter.prose):
        if _RIGHT_WORDS.search(sentence):
            for m in _ROUTE.finditer(sentence):
                note("right", m.group(1), line)
            for m in _STATEMENT.finditer(sentence):
                if m.group(1) not in _NOT_STATEMENTS:
                    note("right", m.group(1), line)
    claims = [_pin(chapter, kind, value, line) for (kind, value), line in found.items()]
    return sorted(claims, key=lambda c: (KINDS.index(c.kind), c.line, c.value))


def _sentences(prose: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The prose cut into sentences, each with the line it starts on."""
    text = "\n".join(t for _, t in prose)
    starts = [n for n, _ in prose]
    offsets, at = [], 0
    for _, t in prose:
        offsets.append(at)
        at += len(t) + 1
    out: list[tuple[int, str]] = []
    begin = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m else len(text)
        index = max(i for i, o in enumerate(offsets) if o <= begin) if offsets else 0
        out.append((starts[index] if starts else 0, text[begin:end]))
        begin = m.end() if m else end
    return out


def _pin(chapter: Chapter, kind: str, value: str, line: int) -> Claim:
    def holding(pattern: str) -> str:
        rx = re.compile(pattern)
        return next((i for i, t in chapter.examples.items() if rx.search(t)), "")

    edge = False
    if kind == "status":
        by = holding(rf'"status":\s*{value}\b') or holding(rf'"\$match":\s*"int"[^}}]*{value}')
    elif kind == "sqlstate":
        by = holding(re.escape(value))
    elif kind == "spelling":
        by = holding(rf"(?<![\w-]){re.escape(value)}(?![\w-])")
    elif kind == "number":
        n = int(value)
        by = holding(rf"(?<![\d.]){n}(?![\d.])")
        edge = bool(by) and bool(holding(rf"(?<![\d.])(?:{n + 1}|{n - 1})(?![\d.])"))
    else:
        by = _sent_as_a_user(chapter, value)
    return Claim(chapter.name, kind, value, line, by, edge)


def _sent_as_a_user(chapter: Chapter, route_or_statement: str) -> str:
    """An example of the chapter that sends the route or statement as another user."""
    for example_id, steps in chapter.steps.items():
        for step in steps:
            request = step.get("request") or {}
            if request.get("auth", "admin") == "admin":
                pg = step.get("pg") or {}
                sent = json.dumps(pg.get("send", [])) if pg.get("user", "admin") != "admin" else ""
                if route_or_statement in sent:
                    return example_id
                continue
            body = str(request.get("body", ""))
            target = request.get("path", "") if route_or_statement.startswith("/") else body
            if target.startswith(route_or_statement) or (
                not route_or_statement.startswith("/") and route_or_statement in body
            ):
                return example_id
    return ""


def all_claims(spec: Path, only: list[str] | None = None) -> list[Claim]:
    """The claims of every chapter (or of the chapters named), chapter by chapter."""
    chapters = read_chapters(spec)
    names = [n for n in chapters if not only or n in only]
    return [claim for name in names for claim in claims_of(chapters[name])]


def read_gaps(path: Path) -> dict[tuple[str, str, str], str]:
    """{(chapter, kind, value): reason} of a gaps file ({} when there is none)."""
    gaps: dict[tuple[str, str, str], str] = {}
    if not path.is_file():
        return gaps
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        text, _, reason = raw.partition("#")
        words = text.split()
        if not words:
            continue
        if len(words) < 3 or words[1] not in KINDS:
            raise ValueError(f"{path}:{number}: write '<chapter> <kind> <value>  # why'")
        gaps[(words[0], words[1], " ".join(words[2:]))] = reason.strip()
    return gaps


def check(claims: list[Claim], gaps: dict[tuple[str, str, str], str]) -> list[str]:
    """Problems: unpinned claims not listed as gaps, and listed gaps pinned (or gone) now."""
    problems = [
        f"spec/{c.chapter}.md:{c.line}: {c.kind} {c.value!r} is pinned by no example and"
        " not listed as a known gap"
        for c in claims
        if not c.pinned_by and c.key not in gaps
    ]
    unpinned = {c.key for c in claims if not c.pinned_by}
    chapters = {c.chapter for c in claims}
    problems += [
        f"gap '{' '.join(key)}' is pinned now (or no longer stated): remove it from the list"
        for key in gaps
        if key[0] in chapters and key not in unpinned
    ]
    return problems


def write_gaps(path: Path, claims: list[Claim], old: dict[tuple[str, str, str], str]) -> int:
    lines = [
        "# Claims of the spec that no example pins (tools/spec_claims.py): '<chapter> <kind>"
        " <value>  # why'.",
        "# A reason says why an example cannot pin it; 'not yet' marks one still to write.",
    ]
    unpinned = [c for c in claims if not c.pinned_by]
    for c in unpinned:
        reason = old.get(c.key) or "not yet"
        lines.append(f"{c.chapter} {c.kind} {c.value}  # {reason}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(unpinned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--spec", type=Path, default=REPO / "spec")
    parser.add_argument("--chapter", action="append", help="only this chapter; may repeat")
    parser.add_argument("--gaps", type=Path, default=GAPS, help="the known gaps' file")
    parser.add_argument("--verbose", "-v", action="store_true", help="every claim, a line each")
    parser.add_argument("--check", action="store_true", help="fail for an unlisted gap")
    parser.add_argument("--write-gaps", action="store_true", help="write the gaps file anew")
    args = parser.parse_args(argv)
    claims = all_claims(args.spec.resolve(), args.chapter)
    try:
        gaps = read_gaps(args.gaps)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.write_gaps:
        print(f"{write_gaps(args.gaps, claims, gaps)} unpinned claim(s) written to {args.gaps}")
        return 0
    for name in dict.fromkeys(c.chapter for c in claims):
        mine = [c for c in claims if c.chapter == name]
        counts = ", ".join(
            f"{kind} {sum(bool(c.pinned_by) for c in mine if c.kind == kind)}"
            f"/{sum(c.kind == kind for c in mine)}"
            for kind in KINDS
        )
        pinned = sum(bool(c.pinned_by) for c in mine)
        print(f"spec/{name}.md: {pinned} of {len(mine)} pinned ({counts})")
        for c in mine if args.verbose else []:
            pin = f"pinned by {c.pinned_by}" + (" (both sides)" if c.edge else "")
            shown = pin if c.pinned_by else f"NOT PINNED ({gaps.get(c.key, 'not listed')})"
            print(f"  {c.line}: {c.kind} {c.value}: {shown}")
    if not args.check:
        return 0
    problems = check(claims, gaps)
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

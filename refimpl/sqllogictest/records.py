"""The sqllogictest script format, read into records.

A script is records separated by blank lines; `#` starts a comment line. A record is
`statement ok` or `statement error` followed by the SQL, `query <types> <sort> [label]`
followed by the SQL, `----` and the expected values (one a line, or `N values hashing to
<md5>`), `hash-threshold N`, or `halt`. Lines `skipif <engine>` / `onlyif <engine>` before a
record say which engines run it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

SORT_MODES = ("nosort", "rowsort", "valuesort")
_HASHED = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")


class ScriptError(ValueError):
    """A script that does not follow the format; says the line."""


@dataclass(frozen=True)
class Conditions:
    """The `skipif` and `onlyif` lines of a record."""

    skip_if: tuple[str, ...] = ()
    only_if: tuple[str, ...] = ()

    def applies_to(self, engines: frozenset[str]) -> bool:
        """Whether an engine answering to these names runs the record."""
        if any(name in engines for name in self.skip_if):
            return False
        return all(name in engines for name in self.only_if)


@dataclass(frozen=True)
class Expected:
    """A query's expected answer: the values themselves, or their count and md5 hash."""

    values: tuple[str, ...] | None = None
    count: int | None = None
    md5: str | None = None


@dataclass(frozen=True)
class Statement:
    line: int
    sql: str
    ok: bool
    conditions: Conditions = field(default_factory=Conditions)


@dataclass(frozen=True)
class Query:
    line: int
    sql: str
    types: str
    sort: str
    label: str | None
    expected: Expected
    conditions: Conditions = field(default_factory=Conditions)


@dataclass(frozen=True)
class HashThreshold:
    line: int
    value: int
    conditions: Conditions = field(default_factory=Conditions)


@dataclass(frozen=True)
class Halt:
    line: int
    conditions: Conditions = field(default_factory=Conditions)


Record = Statement | Query | HashThreshold | Halt


def read_script(text: str) -> list[Record]:
    """Every record of a script, in order; `ScriptError` for a malformed one."""
    return list(_records(text.splitlines()))


def _blocks(lines: list[str]) -> Iterator[tuple[int, list[str]]]:
    """(first line number, lines) of each block between blank lines, comments dropped."""
    block: list[str] = []
    start = 0
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip():
            if block:
                yield start, block
            block = []
            continue
        if line.startswith("#") and not block:
            continue
        if not block:
            start = number
        block.append(line)
    if block:
        yield start, block


def _records(lines: list[str]) -> Iterator[Record]:
    for start, block in _blocks(lines):
        skip_if: list[str] = []
        only_if: list[str] = []
        offset = 0
        while offset < len(block):
            words = block[offset].split()
            if words[0] == "skipif" and len(words) > 1:
                skip_if.append(words[1])
            elif words[0] == "onlyif" and len(words) > 1:
                only_if.append(words[1])
            else:
                break
            offset += 1
        if offset == len(block):
            raise ScriptError(f"line {start}: skipif/onlyif without a record after it")
        conditions = Conditions(tuple(skip_if), tuple(only_if))
        yield _record(start + offset, block[offset:], conditions)


def _record(line: int, block: list[str], conditions: Conditions) -> Record:
    words = block[0].split()
    kind = words[0]
    if kind == "statement":
        if len(words) < 2 or words[1] not in ("ok", "error"):
            raise ScriptError(f"line {line}: write 'statement ok' or 'statement error'")
        return Statement(line, "\n".join(block[1:]), words[1] == "ok", conditions)
    if kind == "query":
        return _query(line, words, block[1:], conditions)
    if kind == "hash-threshold" and len(words) == 2 and words[1].isdigit():
        return HashThreshold(line, int(words[1]), conditions)
    if kind == "halt":
        return Halt(line, conditions)
    raise ScriptError(f"line {line}: unknown record '{block[0]}'")


def _query(line: int, words: list[str], rest: list[str], conditions: Conditions) -> Query:
    if len(words) < 2:
        raise ScriptError(f"line {line}: 'query' needs the column types (I, R, T)")
    types = words[1]
    if not types or any(t not in "IRT" for t in types):
        raise ScriptError(f"line {line}: column types are letters I, R, T; got '{types}'")
    sort = words[2] if len(words) > 2 else "nosort"
    if sort not in SORT_MODES:
        raise ScriptError(f"line {line}: sort mode is one of {', '.join(SORT_MODES)}")
    label = words[3] if len(words) > 3 else None
    if "----" in rest:
        cut = rest.index("----")
        sql_lines, result_lines = rest[:cut], rest[cut + 1 :]
    else:
        sql_lines, result_lines = rest, []
    expected = Expected(values=tuple(result_lines))
    if len(result_lines) == 1 and (hashed := _HASHED.match(result_lines[0].strip())):
        expected = Expected(count=int(hashed.group(1)), md5=hashed.group(2))
    return Query(line, "\n".join(sql_lines), types, sort, label, expected, conditions)

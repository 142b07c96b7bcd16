"""Case files: reading examples out of the spec's markdown, and loading the extracted JSON.

Two layers, both usable on their own:

- `extract_chapter(markdown, source, spec_version)` turns one `spec/*.md` chapter into a
  chapter document (the JSON that `spec/examples/<chapter>.json` holds): every fenced block
  whose info string starts with `sql-example` or `http-example`, with its id, source file
  and line range.
- `example_from_json(data)` wraps one example of such a document; `conformance.case_files`
  loads and checks whole files.

The format itself is described in `conformance/README.md` and `spec/README.md`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.matchers import validate_matchers
from conformance.operators import check_operator_step

FORMAT_VERSION = 1
EXAMPLE_KINDS = {"sql-example": "sql", "http-example": "http"}
ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TYPE_NAMES = ("INT", "BIGINT", "DOUBLE", "STRING", "SYMBOL", "BOOLEAN", "TIMESTAMP")
ROW_SEPARATOR = " | "
NULL_TEXT = "NULL"
EMPTY_TEXT = "(empty)"
SORT_MODES = ("nosort", "rowsort")
STEP_KINDS = ("request", "await", "pending", "restart", "pg", "operator")
RESTART_KINDS = ("graceful", "crash")


class CaseError(ValueError):
    """A case file or spec block that is not well formed; the message names file and line."""


@dataclass(frozen=True)
class Example:
    """One example, as loaded from a chapter document.

    `data` is the example's JSON object exactly as in the file; the other fields are the
    parts a runner and a report need without knowing the format.
    """

    id: str
    kind: str  # "sql" or "http"
    source: str  # the spec file, relative to the repository (spec/sql.md)
    lines: tuple[int, int]  # first and last line of the block's content in `source`
    title: str
    needs: tuple[str, ...]
    data: dict[str, Any] = field(hash=False, compare=False)

    @property
    def location(self) -> str:
        """`spec/sql.md:12-30`: where the example is written."""
        return f"{self.source}:{self.lines[0]}-{self.lines[1]}"

    @property
    def chapter(self) -> str:
        """The chapter name: the source file's stem (`sql`)."""
        return Path(self.source).stem


# ---------------------------------------------------------------------------------------
# Values as the SQL examples write them
# ---------------------------------------------------------------------------------------


def render_value(value: Any) -> str:
    """The canonical text of one JSON value in a `query` result row.

    NULL is `NULL`, booleans `true`/`false`, an integral number without a fraction (`10`,
    also for a DOUBLE 10.0), other numbers as the shortest text that reads back the same
    (`1.5`, `0.1`), an empty string `(empty)`, other strings as they are with line breaks
    written `\\n` and `\\r` (timestamps are strings in JSON and so appear as the server
    wrote them). Objects and lists (never in a
    conforming answer) are written as compact JSON.
    """
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    if isinstance(value, str):
        if value == "":
            return EMPTY_TEXT
        return value.replace("\r", "\\r").replace("\n", "\\n")
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def render_row(values: Iterable[Any]) -> list[str]:
    """`render_value` of each value of a row."""
    return [render_value(v) for v in values]


# ---------------------------------------------------------------------------------------
# Markdown: fenced blocks
# ---------------------------------------------------------------------------------------

_FENCE_RE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_HEADING_RE = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a markdown file. Lines count from 1."""

    info: str
    fence_line: int  # the opening fence
    first_line: int  # the first content line (fence_line + 1)
    last_line: int  # the last content line (first_line - 1 when empty)
    text: str  # the content, lines joined with "\n"
    heading: str  # the nearest heading above the block ("" when none)


def find_blocks(markdown: str) -> list[Block]:
    """Every fenced block (``` or ~~~) of a CommonMark text, nested fences handled."""
    lines = markdown.split("\n")
    blocks: list[Block] = []
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE_RE.match(line)
        if not fence:
            head = _HEADING_RE.match(line)
            if head:
                heading = head.group(2)
            i += 1
            continue
        marker = fence.group(2)
        info = fence.group(3).strip()
        if marker[0] == "`" and "`" in info:
            i += 1  # not a fence (an inline code span); CommonMark rule
            continue
        start = i
        j = i + 1
        while j < len(lines):
            close = _FENCE_RE.match(lines[j])
            if (
                close
                and close.group(2)[0] == marker[0]
                and len(close.group(2)) >= len(marker)
                and not close.group(3).strip()
            ):
                break
            j += 1
        content = lines[start + 1 : j]
        blocks.append(
            Block(
                info=info,
                fence_line=start + 1,
                first_line=start + 2,
                last_line=start + 1 + len(content),
                text="\n".join(content),
                heading=heading,
            )
        )
        i = j + 1
    return blocks


def parse_info(info: str, where: str) -> tuple[str, dict[str, str]]:
    """`sql-example id=x needs=sample` -> ("sql-example", {"id": "x", "needs": "sample"})."""
    words = info.split()
    if not words:
        return "", {}
    attrs: dict[str, str] = {}
    for word in words[1:]:
        if "=" not in word:
            raise CaseError(f"{where}: expected key=value in the info string, got {word!r}")
        key, value = word.split("=", 1)
        attrs[key] = value
    return words[0], attrs


# ---------------------------------------------------------------------------------------
# SQL examples
# ---------------------------------------------------------------------------------------

_COLUMN_RE = re.compile(r'^(?:"((?:[^"]|"")*)"|([^\s:"]+)):([A-Za-z]+)$')


def _split_words(text: str) -> list[str]:
    """Split on spaces, keeping "double quoted" parts (with "" inside) together."""
    words: list[str] = []
    current = ""
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
            current += ch
        elif ch.isspace() and not quoted:
            if current:
                words.append(current)
            current = ""
        else:
            current += ch
    if current:
        words.append(current)
    return words


def parse_sql_records(text: str, first_line: int, where: str) -> list[dict[str, Any]]:
    """The records of a `sql-example` block; `first_line` is the block's first line number.

    Records are separated by blank lines. Lines starting with `#` between records are
    comments. See spec/README.md for the record forms.
    """
    lines = text.split("\n")
    records: list[dict[str, Any]] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.lstrip().startswith("#"):
            i += 1
            continue
        header_line = first_line + i
        here = f"{where}:{header_line}"
        header = line.strip()
        i += 1
        sql_lines: list[str] = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            sql_lines.append(lines[i])
            i += 1
        result_lines: list[str] | None = None
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            result_lines = []
            while i < len(lines) and lines[i].strip():
                result_lines.append(lines[i].rstrip())
                i += 1
        end_line = first_line + i - 1
        if not sql_lines:
            raise CaseError(f"{here}: record {header!r} has no SQL")
        record = _make_record(header, "\n".join(sql_lines), result_lines, here)
        record["line"] = header_line
        record["end_line"] = end_line
        records.append(record)
    if not records:
        raise CaseError(f"{where}:{first_line}: the example has no records")
    return records


def _make_record(header: str, sql: str, result: list[str] | None, here: str) -> dict[str, Any]:
    words = header.split(None, 2)
    if words[0] == "statement" and len(words) >= 2 and words[1] == "ok":
        if len(words) > 2:
            raise CaseError(f"{here}: 'statement ok' takes nothing after it")
        record: dict[str, Any] = {"type": "statement", "expect": "ok", "sql": sql}
        if result is not None:
            if len(result) != 1:
                raise CaseError(f"{here}: 'statement ok' expects one message line after ----")
            record["message"] = result[0]
        return record
    if words[0] in ("statement", "query") and len(words) >= 2 and words[1] == "error":
        record = {"type": "statement", "expect": "error", "sql": sql}
        if len(words) > 2:
            pattern = words[2].strip()
            try:
                re.compile(pattern)
            except re.error as exc:
                raise CaseError(f"{here}: bad error pattern {pattern!r}: {exc}") from None
            record["pattern"] = pattern
        if result is not None:
            record["message"] = "\n".join(result)
        return record
    if words[0] == "query":
        specs = _split_words(header[len("query") :])
        sort = "nosort"
        if specs and specs[-1] in SORT_MODES:
            sort = specs.pop()
        columns = []
        for spec in specs:
            m = _COLUMN_RE.match(spec)
            if not m:
                raise CaseError(f"{here}: bad column {spec!r}; write name:TYPE")
            name = m.group(2) if m.group(2) is not None else m.group(1).replace('""', '"')
            ctype = m.group(3).upper()
            if ctype not in TYPE_NAMES:
                raise CaseError(f"{here}: unknown type {ctype!r} of column {name!r}")
            columns.append({"name": name, "type": ctype})
        if not columns:
            raise CaseError(f"{here}: 'query' needs its columns as name:TYPE")
        if result is None:
            raise CaseError(f"{here}: 'query' needs ---- and the rows (none for an empty result)")
        rows = []
        for offset, row_text in enumerate(result):
            cells = row_text.split(ROW_SEPARATOR)
            if len(cells) != len(columns):
                raise CaseError(
                    f"{here}: row {offset + 1} has {len(cells)} value(s), the query"
                    f" {len(columns)} column(s)"
                )
            rows.append(cells)
        return {"type": "query", "columns": columns, "sort": sort, "sql": sql, "rows": rows}
    raise CaseError(
        f"{here}: unknown record {header!r}; use 'statement ok', 'statement error [regex]'"
        " or 'query <name:TYPE ...> [rowsort]'"
    )


def render_sql_record(record: dict[str, Any]) -> str:
    """The text of one record as a `sql-example` block writes it (without a blank line)."""
    parts: list[str] = []
    if record["type"] == "query":
        cols = []
        for col in record["columns"]:
            name = col["name"]
            if not re.fullmatch(r'[^\s:"]+', name):
                name = '"' + name.replace('"', '""') + '"'
            cols.append(f"{name}:{col['type']}")
        head = "query " + " ".join(cols)
        if record.get("sort", "nosort") != "nosort":
            head += " " + record["sort"]
        parts = [head, record["sql"], "----"]
        parts.extend(ROW_SEPARATOR.join(row) for row in record["rows"])
    elif record["expect"] == "ok":
        parts = ["statement ok", record["sql"]]
        if record.get("message") is not None:
            parts += ["----", record["message"]]
    else:
        head = "statement error"
        if record.get("pattern"):
            head += " " + record["pattern"]
        parts = [head, record["sql"]]
        if record.get("message") is not None:
            parts += ["----", record["message"]]
    return "\n".join(parts)


# ---------------------------------------------------------------------------------------
# HTTP examples
# ---------------------------------------------------------------------------------------


def normalize_http(case: dict[str, Any], where: str) -> dict[str, Any]:
    """Fill in the defaults of an `http-example`'s JSON, so case files are explicit.

    A top-level `request` (with `expect`, `capture`) is one step. A request's `sql` is
    `POST /exec` with that body. `method` defaults to POST when a body is given, else GET;
    `auth` to `admin`; `query` and `headers` to {}. Checks that every step is one kind
    (`request`, `await`, `pending`, `restart`, `pg`, `operator`) and that `await` and
    `pending` name a background request started earlier and not yet awaited.
    """
    if not isinstance(case, dict):
        raise CaseError(f"{where}: an http-example is a JSON object")
    case = dict(case)
    if "request" in case:
        if "steps" in case:
            raise CaseError(f"{where}: give either 'steps' or one 'request', not both")
        step: dict[str, Any] = {
            k: case.pop(k) for k in ("request", "expect", "capture") if k in case
        }
        case["steps"] = [step]
    steps = case.get("steps")
    if not isinstance(steps, list) or not steps:
        raise CaseError(f"{where}: an http-example needs 'steps' (or one 'request')")
    out_steps = []
    started: set[str] = set()
    open_names: set[str] = set()
    for n, step in enumerate(steps, 1):
        here = f"{where}: step {n}"
        if not isinstance(step, dict):
            raise CaseError(f"{here} is not an object")
        kinds = [k for k in STEP_KINDS if k in step]
        if len(kinds) != 1:
            raise CaseError(f"{here} needs exactly one of {', '.join(map(repr, STEP_KINDS))}")
        kind = kinds[0]
        if kind == "request":
            out_steps.append(_normalize_request_step(step, here, started, open_names))
        elif kind == "pg":
            out_steps.append(_normalize_pg_step(step, here))
        elif kind == "restart":
            if step["restart"] not in RESTART_KINDS:
                raise CaseError(f"{here}: 'restart' is 'graceful' or 'crash'")
            out_steps.append(dict(step))
        elif kind == "operator":
            problem = check_operator_step(step, here)
            if problem:
                raise CaseError(problem)
            out_steps.append({"operator": step["operator"], "args": [], "exit": 0, **step})
        else:
            name = step[kind]
            if not isinstance(name, str) or name not in started:
                raise CaseError(f"{here}: no earlier step starts the background request {name!r}")
            if name not in open_names:
                raise CaseError(f"{here}: the background request {name!r} was already awaited")
            if kind == "await":
                open_names.discard(name)
            out_steps.append(dict(step))
    result: dict[str, Any] = {"setup": case.get("setup", []), "steps": out_steps}
    result.update({k: v for k, v in case.items() if k not in result and k not in ("needs",)})
    return result


def _normalize_pg_step(step: dict[str, Any], here: str) -> dict[str, Any]:
    """A `pg` step with its defaults filled in: user and auth `admin`."""
    exchange = step.get("pg")
    if not isinstance(exchange, dict) or not isinstance(exchange.get("send"), list):
        raise CaseError(f"{here}: 'pg' is an object with the messages to 'send', a list")
    if not isinstance(step.get("expect"), list):
        raise CaseError(f"{here}: a 'pg' step's 'expect' is the list of backend messages")
    exchange = {"user": "admin", "auth": "admin", **exchange}
    return {**step, "pg": exchange}


def _normalize_request_step(
    step: dict[str, Any], here: str, started: set[str], open_names: set[str]
) -> dict[str, Any]:
    if not isinstance(step.get("request"), dict):
        raise CaseError(f"{here} needs a 'request' object")
    step = dict(step)
    name = step.get("background")
    if name is not None:
        if not isinstance(name, str) or not name:
            raise CaseError(f"{here}: 'background' names the request, as text")
        if name in started:
            raise CaseError(f"{here}: a background request {name!r} was already started")
        if "expect" in step or "capture" in step:
            raise CaseError(
                f"{here}: a background request is checked by its 'await' step:"
                " move 'expect' and 'capture' there"
            )
        started.add(name)
        open_names.add(name)
    request = dict(step["request"])
    if "sql" in request:
        request.setdefault("method", "POST")
        request.setdefault("path", "/exec")
        request["body"] = request.pop("sql")
    has_body = any(k in request for k in ("body", "json", "form"))
    request.setdefault("method", "POST" if has_body else "GET")
    request["method"] = str(request["method"]).upper()
    request.setdefault("query", {})
    request.setdefault("headers", {})
    request.setdefault("auth", "admin")
    ordered = {
        k: request[k]
        for k in ("method", "path", "query", "headers", "auth", "body", "json", "form", "read")
        if k in request
    }
    ordered.update({k: v for k, v in request.items() if k not in ordered})
    step["request"] = ordered
    return step


# ---------------------------------------------------------------------------------------
# Chapters
# ---------------------------------------------------------------------------------------


def extract_chapter(markdown: str, source: str, spec_version: str) -> dict[str, Any]:
    """The chapter document of one markdown chapter. `source` is its repository path;
    `spec_version` the version of the specification it belongs to (spec/VERSION).

    Raises CaseError (naming `source:line`) for a malformed example block.
    """
    examples: list[dict[str, Any]] = []
    seen: set[str] = set()
    for block in find_blocks(markdown):
        lang, attrs = parse_info(block.info, f"{source}:{block.fence_line}")
        kind = EXAMPLE_KINDS.get(lang)
        if kind is None:
            continue
        where = f"{source}:{block.fence_line}"
        ex_id = attrs.get("id")
        if not ex_id or not ID_RE.match(ex_id):
            raise CaseError(f"{where}: an example needs id=<lowercase-words-with-hyphens>")
        if ex_id in seen:
            raise CaseError(f"{where}: the id {ex_id!r} is used twice")
        seen.add(ex_id)
        needs = [n for n in attrs.get("needs", "").split(",") if n]
        example: dict[str, Any] = {
            "id": ex_id,
            "kind": kind,
            "source": source,
            "lines": [block.first_line, max(block.last_line, block.first_line)],
            "title": block.heading,
        }
        if kind == "sql":
            example["needs"] = needs
            example["records"] = parse_sql_records(block.text, block.first_line, source)
        else:
            try:
                raw = json.loads(block.text)
            except json.JSONDecodeError as exc:
                raise CaseError(
                    f"{source}:{block.first_line + exc.lineno - 1}: bad JSON: {exc.msg}"
                ) from None
            if isinstance(raw, dict):
                needs = needs or list(raw.get("needs", []))
            example["needs"] = needs
            example.update(normalize_http(raw, where))
            problems = validate_matchers(example["steps"])
            if problems:
                raise CaseError(f"{where}: " + "; ".join(problems))
        examples.append(example)
    return {
        "format": FORMAT_VERSION,
        "spec_version": spec_version,
        "chapter": Path(source).stem,
        "source": source,
        "examples": examples,
    }


def dump_chapter(document: dict[str, Any]) -> str:
    """The canonical file text of a chapter document (what is checked in)."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def example_from_json(data: dict[str, Any]) -> Example:
    """Wrap one example object of a chapter document."""
    lines = data.get("lines") or [0, 0]
    return Example(
        id=data["id"],
        kind=data["kind"],
        source=data.get("source", "?"),
        lines=(int(lines[0]), int(lines[1])),
        title=data.get("title", ""),
        needs=tuple(data.get("needs", [])),
        data=data,
    )

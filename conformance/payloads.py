"""Example payloads: placeholders, paths into answers, server-sent events, diffs.

Helpers a caller may use on their own; nothing here speaks HTTP.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from typing import Any

_PLACEHOLDER_RE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PATH_TOKEN_RE = re.compile(r"\.([A-Za-z_][\w-]*)|\[(-?\d+)\]|\[\"([^\"]*)\"\]")


class SubstitutionError(KeyError):
    """A `{{name}}` with nothing captured under that name."""


def substitute(value: Any, variables: dict[str, Any]) -> Any:
    """Replace `{{name}}` in every string (and object key) of `value`.

    A string that is exactly one placeholder becomes the captured value itself (a number
    stays a number); a placeholder inside longer text is replaced by its text. Raises
    SubstitutionError for an unknown name.
    """
    if isinstance(value, str):
        whole = _PLACEHOLDER_RE.fullmatch(value)
        if whole:
            return _lookup(whole.group(1), variables)
        return _PLACEHOLDER_RE.sub(lambda m: as_text(_lookup(m.group(1), variables)), value)
    if isinstance(value, list):
        return [substitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {substitute(k, variables): substitute(v, variables) for k, v in value.items()}
    return value


def _lookup(name: str, variables: dict[str, Any]) -> Any:
    if name not in variables:
        raise SubstitutionError(name)
    return variables[name]


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def unsubstitute(value: Any, variables: dict[str, str]) -> Any:
    """The inverse for `--update`: write `{{name}}` where a variable's text appears."""
    if isinstance(value, str):
        for name, text in variables.items():
            if text:
                value = value.replace(text, "{{" + name + "}}")
        return value
    if isinstance(value, list):
        return [unsubstitute(v, variables) for v in value]
    if isinstance(value, dict):
        return {unsubstitute(k, variables): unsubstitute(v, variables) for k, v in value.items()}
    return value


def resolve_path(root: Any, path: str) -> Any:
    """`$.json.dataset[0][0]` in `root`; KeyError when the path leads nowhere."""
    if not path.startswith("$"):
        raise KeyError(path)
    rest = path[1:]
    value = root
    pos = 0
    while pos < len(rest):
        m = _PATH_TOKEN_RE.match(rest, pos)
        if not m:
            raise KeyError(path)
        pos = m.end()
        key = m.group(1) if m.group(1) is not None else m.group(3)
        if key is not None:
            if isinstance(value, dict) and key in value:
                value = value[key]
            elif isinstance(value, dict) and key.lower() in value:
                value = value[key.lower()]
            else:
                raise KeyError(path)
        else:
            index = int(m.group(2))
            if not isinstance(value, list) or not -len(value) <= index < len(value):
                raise KeyError(path)
            value = value[index]
    return value


def parse_sse(text: str) -> list[dict[str, Any]]:
    """Server-sent events of a `text/event-stream` body, as a list of event objects.

    Each block (lines up to a blank line) with at least one field becomes an object with
    the fields it had: `event` (`message` when the block has data but no event name), `id`,
    `data` (lines joined with newlines, then parsed as JSON when it parses) and `retry`
    (an integer). Comment lines (starting with `:`) are not events. An unfinished last
    block is dropped, as a browser would.
    """
    events: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    data_lines: list[str] = []
    lines = re.split(r"\r\n|\r|\n", text)
    complete = len(lines) - 1  # the text after the last line break is not a finished line
    for i, line in enumerate(lines):
        if i >= complete:
            break
        if line == "":
            if current or data_lines:
                events.append(_finish_event(current, data_lines))
            current, data_lines = {}, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data_lines.append(value)
        elif name == "event":
            current["event"] = value
        elif name == "id":
            current["id"] = value
        elif name == "retry":
            current["retry"] = int(value) if value.isdigit() else value
    return events


def parse_frames(text: str, arrivals: Sequence[tuple[int, float]] = ()) -> list[dict[str, Any]]:
    """Every block of a `text/event-stream` body as it was sent, comments included.

    Each finished block (lines up to a blank line) becomes an object with the fields
    `parse_sse` gives it, plus `comments` (the text of its comment lines, without the `:`
    and one space) when it has any, and `at_ms`: milliseconds from the request to the
    arrival of the block's last byte, from `arrivals` ((bytes read so far, seconds since the
    request) after each read). A block of comments alone (a heartbeat) is a frame too.
    """
    frames: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    data_lines: list[str] = []
    comments: list[str] = []
    offset = 0  # bytes up to the end of the current line, its line break included
    parts = re.split(r"(\r\n|\r|\n)", text)
    # Lines stand at even places, each followed by its line break; the last has none.
    for line, ending in zip(parts[0::2], parts[1::2], strict=False):
        offset += len(line.encode("utf-8")) + len(ending)
        if line == "":
            if fields or data_lines or comments:
                frame = _finish_event(fields, data_lines)
                if comments:
                    frame["comments"] = comments
                frame["at_ms"] = _arrival_ms(offset, arrivals)
                frames.append(frame)
            fields, data_lines, comments = {}, [], []
        elif line.startswith(":"):
            comments.append(line[2:] if line.startswith(": ") else line[1:])
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data_lines.append(value)
            elif name in ("event", "id"):
                fields[name] = value
            elif name == "retry":
                fields["retry"] = int(value) if value.isdigit() else value
    return frames


def _arrival_ms(offset: int, arrivals: Sequence[tuple[int, float]]) -> int | None:
    for read_so_far, seconds in arrivals:
        if read_so_far >= offset:
            return round(seconds * 1000)
    return None


def _finish_event(fields: dict[str, Any], data_lines: list[str]) -> dict[str, Any]:
    event: dict[str, Any] = {}
    if "event" in fields or data_lines:
        event["event"] = fields.get("event", "message")
    if "id" in fields:
        event["id"] = fields["id"]
    if data_lines:
        raw = "\n".join(data_lines)
        try:
            event["data"] = json.loads(raw)
        except ValueError:
            event["data"] = raw
    if "retry" in fields:
        event["retry"] = fields["retry"]
    return event


def json_diff(expected: Any, actual: Any) -> str:
    """A unified diff of two JSON values, pretty-printed; multi-line strings split in lines."""
    left = json.dumps(for_display(expected), indent=2, ensure_ascii=False).splitlines()
    right = json.dumps(for_display(actual), indent=2, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(left, right, "expected", "actual", lineterm="", n=3))


def text_diff(expected: str, actual: str) -> str:
    """A unified diff of two texts."""
    return "\n".join(
        difflib.unified_diff(
            expected.splitlines(), actual.splitlines(), "expected", "actual", lineterm=""
        )
    )


def for_display(value: Any) -> Any:
    if isinstance(value, str) and "\n" in value:
        return value.splitlines(keepends=True)
    if isinstance(value, list):
        return [for_display(v) for v in value]
    if isinstance(value, dict):
        return {k: for_display(v) for k, v in value.items()}
    return value

"""The JSON files of logical replication's stores (slots, publications): read checked,
written durably.

Each file is `{"<key>": [record, ...]}`, replaced whole (`replace_durably`). A file that
cannot be read back as such records (cut short, not JSON, a field missing or of another
type) is a `StorageError` naming the file, what is wrong and the way on, as for every other
damaged file of a data folder: the server does not start on a guess.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from refimpl.engine.files import FileOps, replace_durably
from refimpl.errors import StorageError

_KIND_NAMES = {int: "an integer", str: "a text", bool: "true or false", list: "a list"}


@dataclass(frozen=True, slots=True)
class Field:
    kind: type  # int, str, bool or list (of strings)
    required: bool = True


def read_records(
    path: Path, key: str, fields: Mapping[str, Field], what: str, way_on: str
) -> list[dict[str, Any]]:
    """The records of the file at `path` ([] when there is none), each checked against
    `fields`; a StorageError that names the file, the damage and `way_on` otherwise."""
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(f"the {what} file {path} cannot be read ({exc}); {way_on}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise StorageError(f"the {what} file {path} is not JSON ({exc}); {way_on}") from None
    records = data.get(key) if isinstance(data, dict) else None
    if not isinstance(records, list):
        raise StorageError(f'the {what} file {path} has no "{key}" list; {way_on}')
    for number, record in enumerate(records, 1):
        problem = _problem(record, fields)
        if problem is not None:
            raise StorageError(f"the {what} file {path}: record {number} {problem}; {way_on}")
    return records


def _problem(record: Any, fields: Mapping[str, Field]) -> str | None:
    if not isinstance(record, dict):
        return "is not an object"
    unknown = sorted(set(record) - set(fields))
    if unknown:
        return f"has unknown fields {unknown}"
    for name, field in fields.items():
        if name not in record:
            if field.required:
                return f'has no "{name}"'
            continue
        value = record[name]
        # A bool is an int to Python; a position or a flag of the other kind is damage.
        if type(value) is not field.kind:
            return f'has "{name}" {value!r}, not {_KIND_NAMES[field.kind]}'
        if isinstance(value, list) and not all(isinstance(v, str) for v in value):
            return f'has "{name}" {value!r}, not a list of names'
    return None


def write_records(files: FileOps, path: Path, key: str, records: list[dict[str, Any]]) -> None:
    """Replace the file with these records, durably (see `replace_durably`)."""
    data = json.dumps({key: records}, indent=1).encode("utf-8")
    replace_durably(files, path, data)

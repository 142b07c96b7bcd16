"""Case files on disk: the schema, checking chapter documents, loading their examples.

`load_examples(path)` reads chapter documents (a file or a folder of `*.json`), checks them
against `case.schema.json` and the matcher vocabulary, and returns `Example` objects in
file order. Duplicate ids across files are an error. `default_examples_dir()` is where the
cases shipped with the package are; `spec_version_of(path)` which spec they were made from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.cases import CaseError, Example, example_from_json
from conformance.matchers import validate_matchers

SCHEMA_PATH = Path(__file__).with_name("case.schema.json")


def load_schema() -> dict[str, Any]:
    """The JSON Schema of a chapter document."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def schema_errors(document: Any) -> list[str]:
    """Schema and matcher problems of one chapter document; [] when it is valid."""
    import jsonschema_rs

    validator = jsonschema_rs.validator_for(load_schema())
    problems = [
        f"{'/'.join(str(p) for p in err.instance_path) or '<root>'}: {err.message}"
        for err in validator.iter_errors(document)
    ]
    if not problems:
        for example in document.get("examples", []):
            for problem in validate_matchers(example.get("steps", [])):
                problems.append(f"{example.get('id')}: {problem}")
    return problems


def load_examples(path: Path | str, validate: bool = True) -> list[Example]:
    """Every example of a chapter document, or of every `*.json` in a folder (sorted by name).

    Raises CaseError when a file is not valid JSON, does not fit the schema, or repeats an
    id that another file already has.
    """
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files:
        raise CaseError(f"no case files (*.json) in {path}")
    examples: list[Example] = []
    seen: dict[str, str] = {}
    for file in files:
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CaseError(f"{file}: {exc}") from None
        if validate:
            problems = schema_errors(document)
            if problems:
                raise CaseError(f"{file}: " + "; ".join(problems[:10]))
        for data in document.get("examples", []):
            example = example_from_json(data)
            if example.id in seen:
                raise CaseError(f"{file}: the id {example.id!r} is also in {seen[example.id]}")
            seen[example.id] = file.name
            examples.append(example)
    return examples


def default_examples_dir() -> Path | None:
    """The examples shipped with this package (in a checkout: spec/examples), or None."""
    shipped = Path(__file__).resolve().parent / "examples"
    if shipped.is_dir() and any(shipped.glob("*.json")):
        return shipped
    return None


def spec_version_of(path: Path | str) -> str:
    """The spec version the case files at `path` (a file or a folder) were extracted from.

    Raises CaseError when the files disagree or do not say.
    """
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    versions: set[str] = set()
    for file in files:
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise CaseError(f"{file}: {exc}") from None
        version = document.get("spec_version") if isinstance(document, dict) else None
        if not isinstance(version, str):
            raise CaseError(f"{file}: the case file does not say its spec_version")
        versions.add(version)
    if len(versions) != 1:
        found = ", ".join(sorted(versions)) or "none"
        raise CaseError(f"{path}: the case files are of different spec versions: {found}")
    return versions.pop()

"""Extract the spec's examples into spec/examples/<chapter>.json.

    python tools/extract_examples.py          # write the files
    python tools/extract_examples.py --check  # exit 1 when the checked-in files are stale

Every `spec/*.md` except README.md is a chapter. Each fenced block whose info string starts
with `sql-example` or `http-example` becomes one example, with its id, source file and line
range; the chapter document is checked against conformance/case.schema.json. Ids are unique
across all chapters. A chapter without examples gets no file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from conformance.case_files import schema_errors  # noqa: E402
from conformance.cases import CaseError, dump_chapter, extract_chapter  # noqa: E402

SKIPPED_FILES = {"README.md"}


def chapter_files(spec_dir: Path) -> list[Path]:
    """The chapter files of a spec folder, sorted by name."""
    return sorted(p for p in spec_dir.glob("*.md") if p.name not in SKIPPED_FILES)


def build(spec_dir: Path, repo: Path) -> dict[str, str]:
    """{file name in examples/: file text} for every chapter that has examples.

    Raises CaseError for a malformed block, an invalid document or a repeated id.
    """
    version_file = spec_dir / "VERSION"
    try:
        spec_version = version_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise CaseError(f"{version_file}: {exc}") from None
    outputs: dict[str, str] = {}
    owners: dict[str, str] = {}
    for path in chapter_files(spec_dir):
        try:
            source = path.relative_to(repo).as_posix()
        except ValueError:
            source = path.name
        document = extract_chapter(path.read_text(encoding="utf-8"), source, spec_version)
        problems = schema_errors(document)
        if problems:
            raise CaseError(f"{source}: " + "; ".join(problems[:10]))
        for example in document["examples"]:
            if example["id"] in owners:
                raise CaseError(
                    f"{source}:{example['lines'][0]}: the id {example['id']!r} is also used in"
                    f" {owners[example['id']]}"
                )
            owners[example["id"]] = source
        if document["examples"]:
            outputs[f"{path.stem}.json"] = dump_chapter(document)
    return outputs


def main(argv: list[str] | None = None) -> int:
    """Write (or with --check compare) the examples; return the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when files are stale")
    parser.add_argument("--spec", type=Path, default=REPO / "spec", help="the spec folder")
    args = parser.parse_args(argv)
    spec_dir: Path = args.spec
    out_dir = spec_dir / "examples"
    repo = spec_dir.resolve().parent
    try:
        outputs = build(spec_dir.resolve(), repo)
    except CaseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    existing = {p.name for p in out_dir.glob("*.json")} if out_dir.is_dir() else set()
    if args.check:
        stale = sorted(
            name
            for name in set(outputs) | existing
            if name not in outputs
            or name not in existing
            or (out_dir / name).read_text(encoding="utf-8") != outputs[name]
        )
        if stale:
            print(
                "stale examples in spec/examples: "
                + ", ".join(stale)
                + "; run python tools/extract_examples.py",
                file=sys.stderr,
            )
            return 1
        total = sum(text.count('"kind": ') for text in outputs.values())
        print(f"spec/examples is up to date ({len(outputs)} chapter(s), {total} example(s))")
        return 0
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in existing - set(outputs):
        (out_dir / name).unlink()
    for name, text in outputs.items():
        target = out_dir / name
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    total = sum(text.count('"kind": ') for text in outputs.values())
    print(f"wrote {len(outputs)} chapter(s), {total} example(s) to {out_dir.relative_to(repo)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

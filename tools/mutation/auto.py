"""The automatic mutation run: mutants made by a program, not written from the spec.

    python tools/mutation/auto.py --check                 # every mutant applies and compiles
    python tools/mutation/auto.py --list --sample 50      # the sample, one line a mutant
    python tools/mutation/auto.py --sample 50 --seed 1 --json auto.json --nice 15

The catalogue (`catalogue.toml`) holds deviations a person wrote from the spec's sentences;
this tool makes the other kind, mechanically, over the modules of the newer chapters
(`MODULES`): each comparison operator turned into its neighbour (`<` and `<=`, `==` and
`!=`, `in` and `not in`, `is` and `is not`), each `and` into `or` and back, each `not`
dropped, each `True` into `False` and back, each whole number `n` into `n + 1`, each `+`
into `-` and back. A sample of them (`--sample`, `--seed`) becomes a catalogue of its own
whose entries name the module's chapter, and `run.py` runs it: each mutant against its own
chapter's examples (`--own-chapter`), after the unmutated code passed them. A survivor is
either an equivalent mutant (no behaviour changes: the reason goes in the report) or a
behaviour no example pins (an example goes in the chapter).

Why not mutmut: it runs a test command in-process on its own rewritten copy of the package
and judges by that command's exit code; here a mutant must be a server started from a copy
(with restarts, a second protocol port and settings per example), judged by an external
runner, which is what `run.py` already does for the catalogue.
"""

from __future__ import annotations

import argparse
import ast
import io
import random
import sys
import tempfile
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.mutation import run  # noqa: E402
from tools.mutation.catalogue import REPO, CatalogueError, Deviation, check  # noqa: E402

# The modules of the newer chapters, each judged by its chapter's examples.
MODULES: dict[str, str] = {
    "refimpl/engine/features/feed_options.py": "changefeeds",
    "refimpl/engine/features/stream_options.py": "changefeeds",
    "refimpl/engine/event_streams.py": "stream",
    "refimpl/engine/features/event_cursor.py": "stream",
    "refimpl/http/endpoints/stream_route.py": "stream",
    "refimpl/engine/statements/copy_formats.py": "sources",
    "refimpl/pgwire/tags.py": "pgwire",
    "refimpl/http/request_log.py": "operations",
    "refimpl/settings.py": "settings",
}

_OPERATORS = {
    "<": "<=",
    "<=": "<",
    ">": ">=",
    ">=": ">",
    "==": "!=",
    "!=": "==",
    "+": "-",
    "-": "+",
}
_WORDS = {"and": "or", "or": "and", "True": "False", "False": "True"}


@dataclass(frozen=True)
class Mutant:
    """One mechanical edit: in `file`, line `line`, `before` at column `column` becomes
    `after`."""

    file: str
    chapter: str
    line: int
    column: int
    before: str
    after: str

    @property
    def id(self) -> str:
        stem = Path(self.file).stem.replace("_", "-")
        return f"auto-{stem}-{self.line}-{self.column}"


def _loop_ins(tree: ast.AST) -> set[tuple[int, int]]:
    """Where the `in` of each `for ... in` stands (no test: not mutated), as the start of
    the loop's target, matched to the first `in` token after it."""
    return {
        (node.target.end_lineno or 0, node.target.end_col_offset or 0)
        for node in ast.walk(tree)
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension))
    }


def _unary_minus(tokens: list[tokenize.TokenInfo], index: int) -> bool:
    """Whether the `-` or `+` at `index` is a sign (`-1`, `(-x`), not an operation."""
    before = tokens[index - 1] if index else None
    return (
        before is None
        or (
            before.type in (tokenize.OP, tokenize.NEWLINE, tokenize.NL)
            and before.string not in (")", "]", "}")
        )
        or before.string in ("return", "else", "in", "and", "or", "not", "if", "yield")
    )


def mutants_of(file: str, chapter: str, root: Path = REPO) -> Iterator[Mutant]:
    """Every mutant of one module, in the order of its text."""
    source = (root / file).read_text(encoding="utf-8")
    targets = sorted(_loop_ins(ast.parse(source)))
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    loop_ins = set()
    for target in targets:  # the first `in` after each loop's target
        for token in tokens:
            if token.string == "in" and token.start >= target:
                loop_ins.add(token.start)
                break
    for index, token in enumerate(tokens):
        (line, column), text = token.start, token.string
        if token.line.lstrip().startswith(("@", "assert ")):
            continue  # a decorator's flags and an assertion's test are no behaviour to pin
        previous = tokens[index - 1].string if index else ""
        following = tokens[index + 1].string if index + 1 < len(tokens) else ""
        if token.type == tokenize.OP and text in _OPERATORS:
            if text in "+-" and _unary_minus(tokens, index):
                continue
            after = _OPERATORS[text]
        elif token.type == tokenize.NAME and text in _WORDS:
            after = _WORDS[text]
        elif token.type == tokenize.NAME and text == "in":
            if previous == "not" or token.start in loop_ins:
                continue  # `not in` is mutated through its `not`; a loop's `in` is no test
            after = "not in"
        elif token.type == tokenize.NAME and text == "is":
            if following == "not":
                continue  # `is not` is mutated through its `not`
            after = "is not"
        elif token.type == tokenize.NAME and text == "not":
            after = ""  # `not x` -> `x`, `a not in b` -> `a in b`, `a is not b` -> `a is b`
        elif token.type == tokenize.NUMBER and text.replace("_", "").isdigit():
            after = str(int(text.replace("_", "")) + 1)
        else:
            continue
        yield Mutant(file, chapter, line, column, text, after)


def as_deviation(mutant: Mutant, root: Path = REPO) -> Deviation:
    """The mutant as a catalogue entry: its line (with the lines before it, until the text
    is unique in the file) as the search text."""
    lines = (root / mutant.file).read_text(encoding="utf-8").splitlines(keepends=True)
    text = "".join(lines)
    target = lines[mutant.line - 1]
    end = mutant.column + len(mutant.before)
    changed = target[: mutant.column] + mutant.after + target[end:]
    if not mutant.after and changed[mutant.column : mutant.column + 1] == " ":
        changed = changed[: mutant.column] + changed[mutant.column + 1 :]
    first = mutant.line - 1
    while text.count("".join(lines[first : mutant.line])) > 1 and first > 0:
        first -= 1
    context = "".join(lines[first : mutant.line - 1])
    shown = mutant.after or "(nothing)"
    return Deviation(
        id=mutant.id,
        chapter=mutant.chapter,
        behaviour=f"{mutant.file}:{mutant.line}: `{mutant.before}` -> `{shown}` in "
        f"`{target.strip()}`",
        file=mutant.file,
        search=context + target,
        replace=context + changed,
    )


def every_mutant(modules: dict[str, str] = MODULES, root: Path = REPO) -> list[Deviation]:
    """The mutants of every module that apply once and compile (others are left out)."""
    made: list[Deviation] = []
    for file, chapter in modules.items():
        for mutant in mutants_of(file, chapter, root):
            deviation = as_deviation(mutant, root)
            try:
                compile(check(deviation, root), file, "exec")
            except (CatalogueError, SyntaxError):
                continue
            made.append(deviation)
    return made


def catalogue_text(deviations: Sequence[Deviation]) -> str:
    """A catalogue file `run.py --catalogue` reads (TOML's literal strings cannot hold every
    text: each field is written as a basic string with its escapes)."""

    def quoted(value: str) -> str:
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return '"' + escaped.replace("\t", "\\t") + '"'

    blocks = []
    for d in deviations:
        fields = ("id", "chapter", "behaviour", "file", "search", "replace")
        blocks.append(
            "[[deviation]]\n" + "".join(f"{f} = {quoted(getattr(d, f))}\n" for f in fields)
        )
    return "\n".join(blocks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/mutation/auto.py",
        description="Mechanical mutants of the newer chapters' modules, run as run.py runs "
        "the catalogue. Options it does not know go to run.py (--nice, --runner-jobs, ...).",
    )
    parser.add_argument("--sample", type=int, default=50, help="mutants to run (default 50)")
    parser.add_argument("--seed", type=int, default=1, help="the sample's seed (default 1)")
    parser.add_argument("--list", action="store_true", help="list the sample and stop")
    parser.add_argument(
        "--chapter",
        action="append",
        default=[],
        help="only the modules of this chapter (may repeat): sampled among those",
    )
    parser.add_argument(
        "--check", action="store_true", help="only count the mutants (each applies, compiles)"
    )
    parser.add_argument(
        "--commit", metavar="REV", help="the mutants of this commit's modules (run.py's --commit)"
    )
    args, rest = parser.parse_known_args(argv)
    with tempfile.TemporaryDirectory(prefix="auto-mutants-") as folder:
        root = REPO
        if args.commit:
            root = run.snapshot(args.commit, Path(folder) / "tree")
            rest = ["--commit", args.commit, *rest]
        return _main(args, rest, root, Path(folder))


def _main(args: argparse.Namespace, rest: list[str], root: Path, folder: Path) -> int:
    modules = {f: c for f, c in MODULES.items() if not args.chapter or c in args.chapter}
    made = every_mutant(modules, root)
    if args.check:
        per_module = {f: sum(d.file == f for d in made) for f in modules}
        for file, count in per_module.items():
            print(f"{count:5}  {file} ({modules[file]})")
        print(f"{len(made)} mutants: every one applies and compiles")
        return 0 if all(per_module.values()) else 1
    sample = sorted(
        random.Random(args.seed).sample(made, min(args.sample, len(made))),
        key=made.index,
    )
    if args.list:
        for d in sample:
            print(f"{d.id} ({d.chapter}): {d.behaviour}")
        return 0
    catalogue = folder / "auto.toml"
    catalogue.write_text(catalogue_text(sample), encoding="utf-8")
    return run.main(["--catalogue", str(catalogue), "--own-chapter", *rest])


if __name__ == "__main__":
    raise SystemExit(main())

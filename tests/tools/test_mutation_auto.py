"""The automatic mutation run's short form: the mutants it makes, and that each applies.

The long form (`python tools/mutation/auto.py --sample 50`, each mutant served and judged
by its chapter's examples) runs from tools/, not here: it takes hours on a shared machine.
"""

from __future__ import annotations

from pathlib import Path

from tools.mutation.auto import MODULES, as_deviation, catalogue_text, every_mutant, mutants_of
from tools.mutation.catalogue import check, load

SOURCE = '''\
LIMIT = 10_000


@dataclass(frozen=True)
class Options:
    wait: int = 0


def allowed(n: int, names: list[str], flag: bool) -> bool:
    """Not `not` here: a docstring is no code."""
    assert n is not None
    for name in names:
        if name in ("a", "b") and not flag:
            return n < LIMIT or n == -1
    return n + 1 is None
'''


def test_the_mutants_of_a_module_are_the_operators_words_and_numbers(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(SOURCE, encoding="utf-8")
    made = [(m.line, m.before, m.after) for m in mutants_of("m.py", "stream", tmp_path)]
    assert made == [
        (1, "10_000", "10001"),
        (6, "0", "1"),
        (13, "in", "not in"),  # the test's `in`; the loop's `for name in` is left alone
        (13, "and", "or"),
        (13, "not", ""),
        (14, "<", "<="),
        (14, "or", "and"),
        (14, "==", "!="),
        (14, "1", "2"),  # `-1`'s sign is no subtraction: only its number is mutated
        (15, "+", "-"),
        (15, "1", "2"),
        (15, "is", "is not"),
    ]


def test_a_mutant_becomes_an_entry_whose_search_text_is_unique(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("x = 1\nif x:\n    y = 1\nif x:\n    y = 1\n", encoding="utf-8")
    last = list(mutants_of("m.py", "stream", tmp_path))[-1]
    deviation = as_deviation(last, tmp_path)
    # `    y = 1` occurs twice: the entry takes lines before it until its text is unique.
    assert deviation.search == "    y = 1\nif x:\n    y = 1\n"
    assert deviation.replace == "    y = 1\nif x:\n    y = 2\n"
    assert check(deviation, tmp_path).endswith("if x:\n    y = 1\nif x:\n    y = 2\n")


def test_every_module_gives_mutants_that_apply_and_compile_and_round_trip(
    tmp_path: Path,
) -> None:
    made = every_mutant()
    for file in MODULES:
        assert any(d.file == file for d in made), f"no mutant of {file}"
    assert len({d.id for d in made}) == len(made)
    catalogue = tmp_path / "auto.toml"
    catalogue.write_text(catalogue_text(made), encoding="utf-8")
    assert load(catalogue) == made  # run.py reads back exactly what was made

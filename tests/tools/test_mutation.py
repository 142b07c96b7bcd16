"""tools/mutation: the catalogue stays in step with the code, and the short form of the run.

The short form is the mutation run in small: a fixed sample of deviations from several
chapters, each applied to a copy of refimpl, served, and run against its own chapter's
examples by the unchanged suite; every one must be caught, and the unmutated copy must
pass the same chapters.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.mutation.catalogue import (
    CHAPTERS,
    REPO,
    CatalogueError,
    Deviation,
    check,
    load,
    mutated_copy,
)
from tools.mutation.run import CAUGHT, PASSED, RunSettings, run_one, runner_restart_options

# The deviations the issue names (issue 14), which the suite once let through.
NAMED = (
    "changes-next-own-table",
    "changes-default-limit",
    "changes-wait-cap-refused",
    "changes-unbounded-limit",
    "rev-boot-kept",
    "subscribe-max-rows",
    "subscribe-versions-kept",
    "rights-public-not-for-users",
    "rights-revoke-select-vs-role",
)
# The short form: one deviation of each of six chapters, each caught by its own chapter.
SHORT_FORM = (
    "changes-sse-id-every-row",
    "rev-rule-key-order",
    "subscribe-key-null-whole-row",
    "rights-public-not-for-users",
    "sql-order-nulls-first",
    "imp-field-count",
)


def test_the_catalogue_has_enough_deviations_across_the_chapters() -> None:
    deviations = load()
    assert len(deviations) >= 120
    counted = {d.chapter for d in deviations if d.counted}
    assert {"changes", "revisions", "subscribe", "users-and-rights", "sql"} <= counted
    known = {d.id for d in deviations}
    assert set(NAMED) <= known
    assert set(SHORT_FORM) <= known


@pytest.mark.parametrize("deviation", load(), ids=lambda d: d.id)
def test_every_edit_applies_once_and_compiles(deviation: Deviation) -> None:
    mutated = check(deviation)
    compile(mutated, deviation.file, "exec")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "catalogue.toml"
    path.write_text(text, encoding="utf-8")
    return path


ENTRY = """
[[deviation]]
id = "{id}"
chapter = "{chapter}"
behaviour = "something the spec says"
file = "{file}"
search = "{search}"
replace = "x = 2"
"""


@pytest.mark.parametrize(
    ("fields", "complaint"),
    [
        ({"id": "Bad_Id"}, "lower-case words"),
        ({"chapter": "nowhere"}, "chapter must be one of"),
        ({"file": "tools/other.py"}, "must be in refimpl/"),
        ({"search": "x = 2"}, "equals the search text"),
    ],
)
def test_a_malformed_entry_is_refused_with_its_reason(
    tmp_path: Path, fields: dict[str, str], complaint: str
) -> None:
    values = {
        "id": "changes-x",
        "chapter": "changes",
        "file": "refimpl/errors.py",
        "search": "x = 1",
    } | fields
    with pytest.raises(CatalogueError, match=complaint):
        load(_write(tmp_path, ENTRY.format(**values)))


def test_a_search_text_no_longer_in_the_code_fails_loudly(tmp_path: Path) -> None:
    values = {
        "id": "changes-x",
        "chapter": "changes",
        "file": "refimpl/errors.py",
        "search": "this text is in no file",
    }
    (deviation,) = load(_write(tmp_path, ENTRY.format(**values)))
    with pytest.raises(CatalogueError, match="no longer occurs in refimpl/errors.py"):
        check(deviation)
    twice = ENTRY.format(**values) + ENTRY.format(**values)
    with pytest.raises(CatalogueError, match="used twice"):
        load(_write(tmp_path, twice))


def test_the_copy_is_mutated_and_the_checkout_is_not(tmp_path: Path) -> None:
    deviation = next(d for d in load() if d.id == "changes-default-limit")
    before = (REPO / deviation.file).read_text(encoding="utf-8")
    copy = mutated_copy(deviation, tmp_path)
    assert (copy / deviation.file).read_text(encoding="utf-8") == check(deviation)
    assert (REPO / deviation.file).read_text(encoding="utf-8") == before
    assert (copy / "conformance").resolve() == (REPO / "conformance").resolve()


def test_every_uncounted_entry_gives_its_reason_and_names_a_chapter() -> None:
    for deviation in load():
        assert deviation.chapter in CHAPTERS
        if not deviation.counted:
            reason = deviation.equivalent or deviation.unobservable
            assert len(reason.split()) >= 8, deviation.id
        assert re.search(r"\.md", deviation.behaviour), f"{deviation.id} cites no chapter"


def test_short_form_each_sampled_deviation_is_caught_by_its_own_chapter() -> None:
    settings = RunSettings(own_chapter=True, runner_jobs=4)
    deviations = {d.id: d for d in load()}
    chapters = tuple(sorted({deviations[i].chapter for i in SHORT_FORM}))
    restart_options = runner_restart_options()
    baseline = run_one(None, RunSettings(own_chapter=True, chapters=chapters), restart_options)
    assert baseline.verdict == PASSED, (baseline.failed, baseline.note)
    outcomes = [run_one(deviations[i], settings, restart_options) for i in SHORT_FORM]
    missed = [
        (o.deviation.id, o.verdict, o.note)
        for o in outcomes
        if o.deviation is not None and o.verdict != CAUGHT
    ]
    assert not missed

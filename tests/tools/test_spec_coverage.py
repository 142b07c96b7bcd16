"""tools/spec_coverage.py: what counts as backing a section, and the spec itself covered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tools.spec_coverage import (
    Section,
    chapter_sections,
    problems,
    spec_sections,
    unbacked_rows,
)

REPO = Path(__file__).resolve().parents[2]

CHAPTER = """# Chapter

Intro that states something.

<!-- examples: sql-one -->

## With an example

```sql-example id=sql-one
statement ok
SELECT 1
```

## Without anything

| key | value |
|---|---|
| a | 1 |

```text
# not a heading: inside a fence
| not | a table |
|---|---|
```

## With a reason

<!-- no-example: written to the server's log, which no client sees -->

## With an empty reason

Text.

<!-- no-example:   -->

## Parent

### Child names a missing example

<!-- examples: nope -->
"""


def _sections() -> dict[str, Section]:
    return {s.heading: s for s in chapter_sections(CHAPTER, "spec/c.md")}


def test_what_covers_a_section() -> None:
    sections = _sections()
    assert sections["Chapter"].linked == ["sql-one"]
    assert sections["With an example"].examples == ["sql-one"]
    assert not sections["Without anything"].covered
    assert [t.line for t in sections["Without anything"].tables] == [16]
    assert sections["With a reason"].reason == "written to the server's log, which no client sees"
    assert not sections["With an empty reason"].covered
    assert sections["Parent"].covered  # no text of its own
    assert "not a heading: inside a fence" not in sections


def test_problems_name_place_section_table_and_missing_ids() -> None:
    found = problems(chapter_sections(CHAPTER, "spec/c.md"))
    assert found == [
        "spec/c.md:14: section 'Without anything' has no example and no reason",
        "spec/c.md:16: table '| key | value |' (in 'Without anything') has no example",
        "spec/c.md:30: section 'With an empty reason' has no example and no reason",
        "spec/c.md:38: 'Child names a missing example' names 'nope', which is no example",
    ]


def test_a_reason_for_a_section_and_all_below_it() -> None:
    text = (
        "# Chapter\n\nIntro.\n\n<!-- examples: x -->\n\n"
        "## Tools\n\nNot the API.\n\n<!-- no-example below: command-line tools -->\n\n"
        "### One tool\n\nText.\n\n#### Its flags\n\nText.\n\n"
        "## Back in the API\n\nText.\n"
    )
    sections = chapter_sections(text, "spec/p.md")
    assert [s.reason for s in sections] == [""] + ["(from 'Tools') command-line tools"] * 3 + [""]
    assert [s.heading for s in sections if not s.covered] == ["Back in the API"]


def test_rows_no_example_mentions() -> None:
    text = (
        "# C\n\n| parameter | meaning |\n|---|---|\n| `table` | the table |\n"
        "| `limit` | how many |\n| plain words | no name |\n\n"
        '## Sub\n\n```http-example id=c-one\n{"query": {"table": "t"}}\n```\n'
    )
    sections = chapter_sections(text, "spec/c.md")
    assert [t.rows for t in sections[0].tables] == [[(5, "table"), (6, "limit")]]
    texts = {"c-one": '{"query": {"table": "t"}}'}
    assert unbacked_rows(sections, texts) == ["spec/c.md:6: no example mentions 'limit'"]


def test_every_section_of_the_spec_has_an_example_or_a_reason() -> None:
    sections = spec_sections(REPO / "spec")
    assert len({s.source for s in sections}) >= 10
    found = problems(sections)
    assert not found, "\n".join(found)


def test_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "spec_coverage.py"), "--all"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "spec/changes.md:1: The change stream" in done.stdout
    assert done.stdout.splitlines()[-1].endswith("chapter(s) covered")

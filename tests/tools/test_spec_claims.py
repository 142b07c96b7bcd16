"""tools/spec_claims.py: what it reads as a claim, what pins one, and the spec itself checked
against its list of known gaps (a new sentence whose number, status, spelling or right no
example reaches fails here until an example pins it or the gaps file says why not)."""

from __future__ import annotations

from pathlib import Path

from tools.spec_claims import (
    GAPS,
    REPO,
    Claim,
    all_claims,
    check,
    read_gaps,
    write_gaps,
)

CHAPTER = """# Things

A thing is refused with a 429 and `Retry-After` when a token holds more than 3 things
(`things_per_token`); a name is at most 64 bytes. Over the protocol the error is `53300`.

Only the admin may `DROP THING`; `/api/things` needs READ on the database.

```http-example id=things-limit
{
  "setup": ["CREATE USER u_{{uniq}}"],
  "steps": [
    {"request": {"sql": "CREATE TOKEN FOR u_{{uniq}}"}, "capture": {"tok": "$.json.dataset[0][0]"}},
    {"request": {"path": "/api/things", "auth": "tok"}, "expect": {"status": 403}},
    {"request": {"path": "/api/things", "query": {"n": 4}}, "expect": {"status": 429,
     "headers": {"Retry-After": {"$match": "string"}}}},
    {"request": {"path": "/api/things", "query": {"n": 3}}, "expect": {"status": 200}}
  ]
}
```

This refers to `things-limit` by its id, which is no spelling.
"""


def _claims(tmp_path: Path) -> dict[tuple[str, str], Claim]:
    (tmp_path / "things.md").write_text(CHAPTER)
    return {(c.kind, c.value): c for c in all_claims(tmp_path)}


def test_claims_are_read_from_the_prose_and_pinned_by_the_examples(tmp_path: Path) -> None:
    claims = _claims(tmp_path)
    assert set(claims) == {
        ("status", "429"),
        ("sqlstate", "53300"),
        ("spelling", "Retry-After"),
        ("spelling", "things_per_token"),
        ("number", "3"),
        ("number", "64"),
        ("right", "DROP THING"),
        ("right", "/api/things"),
    }
    assert claims[("status", "429")].pinned_by == "things-limit"
    assert claims[("status", "429")].line == 3
    assert claims[("spelling", "Retry-After")].pinned_by == "things-limit"
    assert not claims[("spelling", "things_per_token")].pinned_by
    assert not claims[("sqlstate", "53300")].pinned_by
    # 3 is in an example, and so is 4: the bound is tested on both sides; 64 is not at all.
    assert claims[("number", "3")].pinned_by and claims[("number", "3")].edge
    assert not claims[("number", "64")].pinned_by
    # a right is pinned by a request of another user than the admin, not by the admin's
    assert claims[("right", "/api/things")].pinned_by == "things-limit"
    assert not claims[("right", "DROP THING")].pinned_by


def test_check_names_new_gaps_and_gaps_pinned_since(tmp_path: Path) -> None:
    claims = list(_claims(tmp_path).values())
    gaps = tmp_path / "gaps.txt"
    assert write_gaps(gaps, claims, {}) == 4
    listed = read_gaps(gaps)
    assert listed[("things", "right", "DROP THING")] == "not yet"
    assert check(claims, listed) == []
    del listed[("things", "number", "64")]
    listed[("things", "status", "429")] = "pinned meanwhile"
    assert check(claims, listed) == [
        "spec/things.md:4: number '64' is pinned by no example and not listed as a known gap",
        "gap 'things status 429' is pinned now (or no longer stated): remove it from the list",
    ]


def test_every_claim_of_the_spec_is_pinned_or_a_listed_gap() -> None:
    problems = check(all_claims(REPO / "spec"), read_gaps(GAPS))
    assert problems == [], (
        "add an example that pins each, or list it in tools/spec_claims_gaps.txt with the"
        " reason no example can (`python tools/spec_claims.py --write-gaps` lists every"
        " unpinned claim, keeping the reasons given):\n" + "\n".join(problems)
    )

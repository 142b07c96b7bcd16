"""The request log finds a long poll's `id=` digits as the search of its whole pattern did."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.http.request_log import _ID_DIGITS, _id_digits

# The search `_id_digits` stands for: an `id=` parameter at the query's start or after a `&`.
_SEARCHED = re.compile(r"(?:^|&)" + _ID_DIGITS.pattern)

# Queries made of the pieces that matter: parameter names ending in `id`, separators, digits,
# letters, dots and an escape, so that near misses (`uid=`, `id=1.`, `id=a.b`) are common.
_pieces = st.sampled_from(["id=", "&", "=", "i", "d", ".", "7", "42", "x", "Ab", "%2E", "u"])


def _span(found: re.Match[str] | None) -> tuple[int, int] | None:
    return None if found is None else found.span(1)


@settings(max_examples=1000)
@given(st.lists(_pieces, max_size=24).map("".join))
def test_finds_the_digits_the_search_found(query: str) -> None:
    assert _span(_id_digits(query)) == _span(_SEARCHED.search(query))


def test_a_long_polls_query() -> None:
    query = "query=SUBSCRIBE+SELECT+1+FROM+t&wait=30000&id=a1b2c3.17"
    assert _span(_id_digits(query)) == (len(query) - 2, len(query))
    assert _id_digits("uid=a1.17&xid=5") is None
    assert _span(_id_digits("id=x.y&id=3")) == (10, 11)

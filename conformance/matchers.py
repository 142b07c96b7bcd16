"""The matcher vocabulary of the conformance cases, and structural matching with diffs.

An expected value is plain JSON, compared for equality, except objects with a `$match` key:

| matcher | matches |
|---|---|
| `{"$match": "int"}` | a JSON integer (not a boolean); optional `gt`, `ge`, `lt`, `le` bounds |
| `{"$match": "number"}` | any JSON number (not a boolean); the same optional bounds |
| `{"$match": "string"}` | a string; optional `regex` (Python `re.search`: anchor with ^ $) |
| `{"$match": "timestamp"}` | ISO-8601 UTC text ending in `Z` (`2026-09-24T10:00:00.000Z`) |
| `{"$match": "any"}` | any value, null included (the key must still be present) |
| `{"$match": "same", "as": "name"}` | equal to the value captured as `name` |
| `{"$match": "differs", "from": "name"}` | any value but the one captured as `name` (it moved) |
| `{"$match": "unordered", "items": [...]}` | a list whose items match `items` in any order |
| `{"$match": "contains", "value": {...}}` | an object with at least these keys (extra keys |
| | allowed), or a list holding items that match each of `value`'s items |

Any matcher may carry `"capture": "name"`: when it matches, the actual value is kept under
that name for later steps (`{{name}}`) and for `same` matchers.

Objects match exactly (same keys) unless `contains`; lists match item by item, same length.
Numbers compare by value (`10` equals `10.0`); booleans equal only booleans.

`match()` returns a `MatchOutcome` with the verdict, one line per mismatch, and two views
that reports use: `expected_view` (the expectation with every matched part replaced by the
actual value, so that a diff against the actual shows only real differences) and
`update_view` (the expectation with matchers kept where they matched and actual values where
they did not: what a `--update` writes back).
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MATCH_KEY = "$match"
MATCHER_KINDS = frozenset(
    {"int", "number", "string", "timestamp", "any", "same", "differs", "unordered", "contains"}
)
TIMESTAMP_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
_BOUNDS = {
    "gt": (lambda a, b: a > b, ">"),
    "ge": (lambda a, b: a >= b, ">="),
    "lt": (lambda a, b: a < b, "<"),
    "le": (lambda a, b: a <= b, "<="),
}
# Unordered matching tries permutations; beyond this many items it matches greedily.
_PERMUTATION_LIMIT = 7


class MatcherError(ValueError):
    """An expectation that is not a valid matcher (a case-file bug, not a failed match)."""


@dataclass
class MatchOutcome:
    """The result of `match`. `ok` is the verdict; `mismatches` says where and why."""

    ok: bool
    expected_view: Any
    update_view: Any
    mismatches: list[str] = field(default_factory=list)


def is_matcher(value: Any) -> bool:
    """True when `value` is a matcher object (a dict with a `$match` key)."""
    return isinstance(value, dict) and MATCH_KEY in value


def validate_matchers(value: Any, path: str = "$") -> list[str]:
    """Problems of the matchers inside `value` (unknown kinds, missing fields); [] when none."""
    problems: list[str] = []
    if isinstance(value, dict):
        if MATCH_KEY in value:
            kind = value[MATCH_KEY]
            if kind not in MATCHER_KINDS:
                problems.append(f"{path}: unknown matcher {kind!r}")
            elif kind == "same" and not isinstance(value.get("as"), str):
                problems.append(f'{path}: matcher \'same\' needs "as": "<capture name>"')
            elif kind == "differs" and not isinstance(value.get("from"), str):
                problems.append(f'{path}: matcher \'differs\' needs "from": "<capture name>"')
            elif kind == "unordered" and not isinstance(value.get("items"), list):
                problems.append(f"{path}: matcher 'unordered' needs a list \"items\"")
            elif kind == "contains" and not isinstance(value.get("value"), dict | list):
                problems.append(f"{path}: matcher 'contains' needs an object or list \"value\"")
            elif kind == "string" and "regex" in value:
                try:
                    re.compile(value["regex"])
                except re.error as exc:
                    problems.append(f"{path}: bad regex {value['regex']!r}: {exc}")
            if kind == "unordered":
                for i, item in enumerate(value.get("items") or []):
                    problems.extend(validate_matchers(item, f"{path}.items[{i}]"))
            if kind == "contains":
                inner = value.get("value")
                if isinstance(inner, dict):
                    for key, item in inner.items():
                        problems.extend(validate_matchers(item, f"{path}.value.{key}"))
                elif isinstance(inner, list):
                    for i, item in enumerate(inner):
                        problems.extend(validate_matchers(item, f"{path}.value[{i}]"))
        else:
            for key, item in value.items():
                problems.extend(validate_matchers(item, f"{path}.{key}"))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems.extend(validate_matchers(item, f"{path}[{i}]"))
    return problems


def describe(matcher: Mapping[str, Any]) -> str:
    """A short human text for a matcher, as diffs show it: `<int > 4>`, `<timestamp>`."""
    kind = matcher.get(MATCH_KEY)
    parts = [str(kind)]
    for key, (_, sign) in _BOUNDS.items():
        if key in matcher:
            parts.append(f"{sign} {matcher[key]!r}")
    if kind == "string" and "regex" in matcher:
        parts.append(f"~ /{matcher['regex']}/")
    if kind == "same":
        parts.append(f"as {matcher.get('as')}")
    if kind == "differs":
        parts.append(f"from {matcher.get('from')}")
    return "<" + " ".join(parts) + ">"


def match(expected: Any, actual: Any, captures: dict[str, Any] | None = None) -> MatchOutcome:
    """Match `actual` against `expected`; captures made by matchers go into `captures`.

    Captures are added only when the whole match succeeds, so a failed match leaves
    `captures` as it was.
    """
    base = captures if captures is not None else {}
    work = dict(base)
    mismatches: list[str] = []
    expected_view, update_view = _match(expected, actual, "$", work, mismatches)
    ok = not mismatches
    if ok:
        base.update(work)
    return MatchOutcome(ok, expected_view, update_view, mismatches)


def values_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value, booleans only with booleans, recursive."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _match(
    expected: Any, actual: Any, path: str, captures: dict[str, Any], out: list[str]
) -> tuple[Any, Any]:
    """Append mismatches to `out`; return (expected_view, update_view) for this node."""
    if is_matcher(expected):
        return _match_matcher(expected, actual, path, captures, out)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            out.append(f"{path}: expected an object, got {_short(actual)}")
            return expected, actual
        exp_view: dict[str, Any] = {}
        upd_view: dict[str, Any] = {}
        for key, value in actual.items():
            if key in expected:
                exp_view[key], upd_view[key] = _match(
                    expected[key], value, f"{path}.{key}", captures, out
                )
            else:
                out.append(f"{path}: unexpected key {key!r}")
                upd_view[key] = value
        for key, value in expected.items():
            if key not in actual:
                out.append(f"{path}: missing key {key!r}")
                exp_view[key] = value
        return exp_view, upd_view
    if isinstance(expected, list):
        if not isinstance(actual, list):
            out.append(f"{path}: expected a list, got {_short(actual)}")
            return expected, actual
        exp_items: list[Any] = []
        upd_items: list[Any] = []
        for i, value in enumerate(actual):
            if i < len(expected):
                ev, uv = _match(expected[i], value, f"{path}[{i}]", captures, out)
                exp_items.append(ev)
                upd_items.append(uv)
            else:
                upd_items.append(value)
        if len(actual) != len(expected):
            out.append(f"{path}: expected {len(expected)} item(s), got {len(actual)}")
            exp_items.extend(expected[len(actual) :])
        return exp_items, upd_items
    if values_equal(expected, actual):
        return actual, expected
    out.append(f"{path}: expected {_short(expected)}, got {_short(actual)}")
    return expected, actual


def _match_matcher(
    matcher: dict[str, Any], actual: Any, path: str, captures: dict[str, Any], out: list[str]
) -> tuple[Any, Any]:
    kind = matcher[MATCH_KEY]
    before = len(out)
    exp_view: Any = actual
    upd_view: Any = matcher
    if kind in ("int", "number"):
        ok_type = _is_number(actual) and (kind == "number" or isinstance(actual, int))
        if not ok_type:
            out.append(f"{path}: expected {describe(matcher)}, got {_short(actual)}")
        else:
            for key, (test, sign) in _BOUNDS.items():
                if key not in matcher:
                    continue
                bound = matcher[key]
                if isinstance(bound, str) and bound in captures:
                    bound = captures[bound]
                if not _is_number(bound):
                    raise MatcherError(f"{path}: bound {key} is not a number: {bound!r}")
                if not test(actual, bound):
                    out.append(f"{path}: expected a value {sign} {bound}, got {actual}")
    elif kind == "string":
        if not isinstance(actual, str):
            out.append(f"{path}: expected {describe(matcher)}, got {_short(actual)}")
        elif "regex" in matcher and not re.search(matcher["regex"], actual):
            out.append(f"{path}: {actual!r} does not match /{matcher['regex']}/")
    elif kind == "timestamp":
        if not isinstance(actual, str) or not TIMESTAMP_RE.match(actual):
            out.append(f"{path}: expected an ISO-8601 UTC timestamp, got {_short(actual)}")
    elif kind == "any":
        pass
    elif kind == "same":
        name = matcher.get("as")
        if name not in captures:
            out.append(f"{path}: nothing was captured as {name!r}")
        elif not values_equal(captures[name], actual):
            out.append(
                f"{path}: expected the value captured as {name!r} "
                f"({_short(captures[name])}), got {_short(actual)}"
            )
    elif kind == "differs":
        name = matcher.get("from")
        if name not in captures:
            out.append(f"{path}: nothing was captured as {name!r}")
        elif values_equal(captures[name], actual):
            out.append(
                f"{path}: expected a value other than the one captured as {name!r},"
                f" got the same {_short(actual)}"
            )
    elif kind == "unordered":
        exp_view, upd_view = _match_unordered(matcher, actual, path, captures, out)
    elif kind == "contains":
        exp_view, upd_view = _match_contains(matcher, actual, path, captures, out)
    else:
        raise MatcherError(f"{path}: unknown matcher {kind!r}")
    if len(out) > before:
        if kind not in ("unordered", "contains"):
            exp_view, upd_view = describe(matcher), actual
        return exp_view, upd_view
    name = matcher.get("capture")
    if isinstance(name, str):
        captures[name] = actual
    return exp_view, upd_view


def _try(expected: Any, actual: Any, captures: dict[str, Any]) -> tuple[bool, dict[str, Any]]:
    trial = dict(captures)
    problems: list[str] = []
    _match(expected, actual, "$", trial, problems)
    return not problems, trial


def _match_unordered(
    matcher: dict[str, Any], actual: Any, path: str, captures: dict[str, Any], out: list[str]
) -> tuple[Any, Any]:
    items = matcher.get("items", [])
    if not isinstance(actual, list):
        out.append(f"{path}: expected a list (unordered), got {_short(actual)}")
        return matcher, actual
    if len(items) != len(actual):
        out.append(f"{path}: expected {len(items)} item(s) in any order, got {len(actual)}")
        return _sorted_view(items, actual), actual
    assignment = _assign(items, actual, captures)
    if assignment is None:
        out.append(f"{path}: the items do not match in any order")
        return _sorted_view(items, actual), actual
    _, trial = assignment
    captures.update(trial)
    return list(actual), matcher


def _sorted_view(items: list[Any], actual: list[Any]) -> list[Any]:
    """Expected items in the order that best lines them up with `actual` for a diff."""
    remaining = list(items)
    view: list[Any] = []
    for value in actual:
        for i, item in enumerate(remaining):
            if _try(item, value, {})[0]:
                view.append(value)
                del remaining[i]
                break
    view.extend(remaining)
    return view


def _assign(
    items: list[Any], actual: list[Any], captures: dict[str, Any]
) -> tuple[list[int], dict[str, Any]] | None:
    """Map each expected item to a distinct actual index; None when impossible."""
    candidates = [
        [j for j, value in enumerate(actual) if _try(item, value, captures)[0]] for item in items
    ]
    if any(not c for c in candidates):
        return None
    if len(items) <= _PERMUTATION_LIMIT:
        for choice in itertools.product(*candidates):
            if len(set(choice)) != len(choice):
                continue
            trial = dict(captures)
            ok = all(
                not _collect(item, actual[j], trial) for item, j in zip(items, choice, strict=True)
            )
            if ok:
                return list(choice), trial
        return None
    used: set[int] = set()
    trial = dict(captures)
    order: list[int] = []
    for item, cands in zip(items, candidates, strict=True):
        pick = next((j for j in cands if j not in used and _try(item, actual[j], trial)[0]), None)
        if pick is None:
            return None
        _collect(item, actual[pick], trial)
        used.add(pick)
        order.append(pick)
    return order, trial


def _collect(expected: Any, actual: Any, captures: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    _match(expected, actual, "$", captures, problems)
    return problems


def _match_contains(
    matcher: dict[str, Any], actual: Any, path: str, captures: dict[str, Any], out: list[str]
) -> tuple[Any, Any]:
    wanted = matcher.get("value")
    if isinstance(wanted, dict):
        if not isinstance(actual, dict):
            out.append(
                f"{path}: expected an object containing {sorted(wanted)}, got {_short(actual)}"
            )
            return matcher, actual
        exp_view = dict(actual)
        inner_update: dict[str, Any] = {}
        for key, value in wanted.items():
            if key not in actual:
                out.append(f"{path}: missing key {key!r}")
                exp_view[key] = value
                continue
            exp_view[key], inner_update[key] = _match(
                value, actual[key], f"{path}.{key}", captures, out
            )
        return exp_view, {MATCH_KEY: "contains", "value": inner_update}
    if isinstance(wanted, list):
        if not isinstance(actual, list):
            out.append(f"{path}: expected a list containing items, got {_short(actual)}")
            return matcher, actual
        assignment = _assign(wanted, actual, captures)
        if assignment is None:
            missing = [w for w in wanted if not any(_try(w, a, captures)[0] for a in actual)]
            shown = missing[0] if missing else wanted[0]
            out.append(f"{path}: no item matches {_short(shown)}")
            return list(actual) + copy.deepcopy(missing), actual
        _, trial = assignment
        captures.update(trial)
        return list(actual), matcher
    raise MatcherError(f"{path}: matcher 'contains' needs an object or list value")


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""`~`, `!~`, `~*`, `!~*`: PostgreSQL's regular-expression match, in linear time.

Patterns come from clients (psql sends `'^(t)$'` for `\\d t`), so they are matched by RE2
(google-re2), whose time is linear in the text whatever the pattern: no backtracking
pattern can stall the server. A pattern RE2 cannot read is an InvalidValue naming it and
saying why, as text. RE2 is told not to log its errors: it would write its own lines to the
server's stderr, which is the server's log (one record a line, JSON in `--log-format json`).

Linear in the text is still the text's length times the pattern's size at worst: RE2's
automaton gives up on a pattern of many optional parts (`a?a?...a?b`, 4,000 characters) and
steps through all of its states at every character, 39 s for one 300 KB text. One RE2 call
cannot be stopped, and it would ignore the statement timeout (holding the database's state
lock meanwhile, when it is a WHERE of a scan): so a match that may be long (`_search`) is
first run on prefixes of the text, doubling, each timed; once the time a prefix took,
scaled to the whole text, is past the statement's deadline, the statement stops there with
the timeout's error, having spent at most about that much.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2

from refimpl.engine.query import deadlines
from refimpl.errors import InvalidValue, StatementTimeout

OPERATORS = frozenset({"~", "!~", "~*", "!~*"})
# Under this many (text characters x pattern program steps) a search is quick whatever the
# pattern (about 30 ms at worst, measured): it runs at once. A longer one is timed on
# prefixes of the text, the first of this many units.
QUICK_UNITS = 1_000_000


@lru_cache(maxsize=256)
def _compiled(pattern: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "RE2 cannot read it"
        if isinstance(reason, bytes):  # google-re2 gives RE2's message as UTF-8 bytes
            reason = reason.decode("utf-8", "replace")
        raise InvalidValue(f"invalid regular expression {pattern!r}: {reason}") from None


def matcher(op: str) -> Callable[[Any, Any], bool]:
    """The operation of `op` on (text, pattern); NULLs are the caller's business."""
    negated = op.startswith("!")
    ignore_case = op.endswith("*")

    def match(text: Any, pattern: Any) -> bool:
        if not isinstance(text, str) or not isinstance(pattern, str):
            raise InvalidValue(f"operator {op} matches text against a text pattern")
        return _search(_compiled(pattern, ignore_case), text) != negated

    return match


def _search(compiled: Any, text: str) -> bool:
    """Whether `compiled` matches somewhere in `text`; StatementTimeout once the search would
    run past the running statement's deadline (see the module docstring)."""
    if len(text) * compiled.programsize <= QUICK_UNITS or deadlines.time_left() is None:
        return compiled.search(text) is not None
    size = max(1024, QUICK_UNITS // compiled.programsize)
    while size < len(text):
        started = time.monotonic()
        compiled.search(text[:size])  # only timed: its answer may differ from the whole's
        spent = time.monotonic() - started
        left = deadlines.time_left()
        if left is not None and spent * len(text) / size > left:
            raise StatementTimeout.ran_too_long()
        size *= 2
    return compiled.search(text) is not None

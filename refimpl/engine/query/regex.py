"""`~`, `!~`, `~*`, `!~*`: PostgreSQL's regular-expression match, in linear time.

Patterns come from clients (psql sends `'^(t)$'` for `\\d t`), so they are matched by RE2
(google-re2), whose time is linear in the text whatever the pattern: no backtracking
pattern can stall the server. A pattern RE2 cannot read is an InvalidValue naming it and
saying why, as text. RE2 is told not to log its errors: it would write its own lines to the
server's stderr, which is the server's log (one record a line, JSON in `--log-format json`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2

from refimpl.errors import InvalidValue

OPERATORS = frozenset({"~", "!~", "~*", "!~*"})


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
        found = _compiled(pattern, ignore_case).search(text) is not None
        return found != negated

    return match

"""`~`, `!~`, `~*`, `!~*`: PostgreSQL's regular-expression match, in linear time.

Patterns come from clients (psql sends `'^(t)$'` for `\\d t`), so they are matched by RE2
(google-re2), whose time is linear in the text whatever the pattern: no backtracking
pattern can stall the server. A pattern RE2 cannot read is an InvalidValue naming it and
saying why, as text. RE2 is told not to log its errors: it would write its own lines to the
server's stderr, which is the server's log (one record a line, JSON in `--log-format json`).

Compiling a pattern holds the interpreter lock, every other thread of the server waiting,
for a time that grows faster than the pattern (`a?` 30,000 times: 4 s; `\\pL?` 1,024 times:
0.13 s), so a pattern is at most MAX_PATTERN_CHARS characters, checked before RE2 sees it,
and is first compiled with MAX_MEM_BYTES of memory, which RE2 refuses for a pattern whose
program needs more (a bounded repetition of a large class, `(?:a?){1000}` five times) after
some 20 ms at most: both are a StatementTooLarge naming the limit. The RE2 object that
matches is compiled again with MATCH_MEM_BYTES (as long again, for a program within the
limit): the rest of its memory is its automaton's cache, and in 1 MB the automaton of a
pattern of a few hundred optional parts gives up at once, every search then a thousand
times slower (2 s, not 2 ms, over 300 KB). At most CACHED compiled patterns are kept, their
caches together within a bounded memory.

Matching lets the interpreter lock go (other threads run meanwhile), but one RE2 call
cannot be stopped, and it is linear in the text only times the pattern's program at worst:
RE2's automaton gives up on a pattern of many optional parts (`a?a?...a?b`) and steps
through all of its states at every character, 20 s for one 300 KB text. Whether it gives up
depends on what the pattern's shared cache went through before, so timing a search on a
part of the text does not bound the whole one's. A search is therefore started only when its
worst case (the text's length times the program's size, at SECONDS_PER_STEP a step) fits in
the time left to the running statement; one that does not stops the statement at once with
the timeout's error, having spent nothing. Outside a statement, a search has no deadline.
A long search waits for its turn (one at a time, LONG_SEARCH_SECONDS), within that deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2

from refimpl.engine import admission
from refimpl.engine.query import deadlines
from refimpl.engine.storage.locks import reading_under_lock
from refimpl.errors import InvalidValue, SearchPastDeadline, StatementTimeout, StatementTooLarge

OPERATORS = frozenset({"~", "!~", "~*", "!~*"})
# A pattern's characters at most: compiling 1,024 of the costliest kind holds the interpreter
# lock about 20 ms (measured), against 0.13 s for 4,096.
MAX_PATTERN_CHARS = 1024
# RE2's memory for one pattern: its program takes at most about two thirds of it (some
# 40,000 steps), its automaton's caches the rest. A pattern past it fails to compile early.
MAX_MEM_BYTES = 1024 * 1024
# The memory of the RE2 object that matches (a pattern within MAX_MEM_BYTES), and how many
# are kept: together 128 MB at most, however many patterns clients send.
MATCH_MEM_BYTES = 4 * 1024 * 1024
CACHED = 32
# The time of one step of RE2's slowest engine (one character against one instruction of
# the program): about 7 ns measured at worst, with room for a busy machine.
SECONDS_PER_STEP = 10e-9
# A search whose worst case is past this runs only while it holds `_long_searches`: one at a
# time in the server (not under a state lock, where commits would wait for the turn). Such a
# search lets the interpreter lock go but keeps a processor busy for seconds, and several
# users' at once kept every processor busy: the threads answering everyone else waited for
# one (a victim's events 260 ms late at p99 beside three such streams, 110 ms without).
LONG_SEARCH_SECONDS = 0.05
_long_searches = threading.Lock()


def _compiled(pattern: str, ignore_case: bool) -> Any:
    """The RE2 object matching `pattern`; StatementTooLarge or InvalidValue for one refused."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise StatementTooLarge(
            f"a regular expression has {len(pattern)} characters, more than the"
            f" {MAX_PATTERN_CHARS} a pattern may have; match a shorter pattern, or several"
        )
    compiled = _compile(pattern, ignore_case)
    if isinstance(compiled, tuple):  # refused: a new error each time (threads share the cache)
        error, message = compiled
        raise error(message)
    return compiled


# Refusals are kept too, as (error, message): refusing a pattern past the program's limit
# costs a compile.
@lru_cache(maxsize=CACHED)
def _compile(pattern: str, ignore_case: bool) -> Any:
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = MAX_MEM_BYTES
    try:
        re2.compile(pattern, options)  # within the limit, or refused early
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "RE2 cannot read it"
        if isinstance(reason, bytes):  # google-re2 gives RE2's message as UTF-8 bytes
            reason = reason.decode("utf-8", "replace")
        if reason.startswith("pattern too large"):
            return StatementTooLarge, (
                f"the regular expression {_shown(pattern)} compiles to more than the"
                f" {MAX_MEM_BYTES // (1024 * 1024)} MB of program a pattern may have; repeat"
                " fewer or smaller parts (a bounded repetition of a class, say)"
            )
        return InvalidValue, f"invalid regular expression {pattern!r}: {reason}"
    options.max_mem = MATCH_MEM_BYTES
    return re2.compile(pattern, options)


def _shown(pattern: str) -> str:
    """The pattern for a message: whole when short, its start otherwise."""
    return repr(pattern) if len(pattern) <= 60 else f"{pattern[:60]!r}... ({len(pattern)} chars)"


def matcher(op: str) -> Callable[[Any, Any], bool]:
    """The operation of `op` on (text, pattern); NULLs are the caller's business."""
    negated = op.startswith("!")
    ignore_case = op.endswith("*")

    def match(text: Any, pattern: Any) -> bool:
        if not isinstance(text, str) or not isinstance(pattern, str):
            raise InvalidValue(f"operator {op} matches text against a text pattern")
        return _search(_compiled(pattern, ignore_case), text) != negated

    return match


def check_pattern(op: str, pattern: Any) -> None:
    """Compile a pattern known before any row (a literal, a parameter), so that one past a
    limit, or unreadable, is refused when the statement is planned, whatever its rows."""
    if isinstance(pattern, str):
        _compiled(pattern, op.endswith("*"))


def _search(compiled: Any, text: str) -> bool:
    """Whether `compiled` matches somewhere in `text`; SearchPastDeadline (a StatementTimeout
    saying why), without searching, when the search's worst case would run past the running
    statement's deadline; StatementTimeout when its turn among long searches would not come
    in time for it (see LONG_SEARCH_SECONDS)."""
    left = deadlines.time_left()
    worst = len(text) * compiled.programsize * SECONDS_PER_STEP
    if left is not None and worst > left:
        raise SearchPastDeadline(len(text), compiled.programsize, worst, left)
    if worst <= LONG_SEARCH_SECONDS or reading_under_lock():  # a commit would wait for it
        return compiled.search(text) is not None
    admission.waiting()  # its place goes to another request while it waits for its turn
    if not _long_searches.acquire(timeout=-1 if left is None else max(left - worst, 0.0)):
        raise StatementTimeout.ran_too_long()
    try:
        return compiled.search(text) is not None
    finally:
        _long_searches.release()

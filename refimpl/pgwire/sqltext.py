"""A query text as PostgreSQL clients write it: statements split at `;`, `$n` parameters.

The engine numbers `?` placeholders in text order; PostgreSQL names them `$1`, `$2`, ...,
in any order and any number of times. `split` reads the text once (quotes, quoted names,
a body of CREATE PROCEDURE or TRIGGER, `$$ ... $$` or `BEGIN ... END`, and comments
respected), cuts it into statements and writes each `$n` as `?` padded to the same width,
so that a character position the engine reports is the same in the client's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DOLLAR_QUOTE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_CREATE = re.compile(r"\s*CREATE\b", re.IGNORECASE)  # BEGIN inside it opens a body
# The text is read by runs, each found by one C call, not a character at a time (a
# pipeline's 14 KB query cost 2.5 ms in a loop over its characters): in a quoted part, from
# one quote (or, in E'...', backslash) to the next; a word (`\w` is `str.isalnum()` or `_`,
# as `_word`); a run of characters that start nothing (no quote, word, comment, `$` or `;`).
# Each call is short whatever the text, so the interpreter lock still goes round.
_E_QUOTE_STOPS = re.compile(r"['\\]")
_WORD = re.compile(r"\w+")
# A placeholder's number: ASCII digits only (`$²` is no placeholder: int() cannot read it).
_ASCII_DIGITS = frozenset("0123456789")
_DIGITS = re.compile(r"[0-9]+")
_PLAIN = re.compile(r"[^\w'\"$;/\-]+")


@dataclass(frozen=True, slots=True)
class Piece:
    """One statement: the engine's text (`?` for each `$n`), where it starts in the client's
    text, and the `$n` numbers of its placeholders in text order."""

    text: str
    offset: int
    params: tuple[int, ...]


def _skip_quoted(text: str, at: int, quote: str, backslashes: bool) -> int:
    """The index after the closing quote of the quoted part that starts at `at`."""
    i = at + 1
    while True:
        if backslashes:
            stop = _E_QUOTE_STOPS.search(text, i)
            at = -1 if stop is None else stop.start()
        else:
            at = text.find(quote, i)
        if at < 0:
            return len(text)
        if text[at] == "\\" or text.startswith(quote, at + 1):
            i = at + 2  # an escaped character, or a doubled quote: the part goes on
        else:
            return at + 1


def _skip_block_comment(text: str, at: int) -> int:
    depth, i, n = 0, at, len(text)
    while i < n:
        if text.startswith("/*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*/", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def split(text: str) -> list[Piece]:
    """The statements of `text`, empty ones (`;;`, comments alone) left out."""
    if "$" not in text and ";" not in text and "--" not in text and "/*" not in text:
        # One statement, no placeholder, no comment (a driver's usual text): nothing to cut
        # nor to write again, found by four searches in C instead of reading it by runs.
        stripped = text.strip()
        return [Piece(stripped, len(text) - len(text.lstrip()), ())] if stripped else []
    return read_by_runs(text)


def read_by_runs(text: str) -> list[Piece]:
    """`split`'s answer for any text, read a run at a time."""
    pieces: list[Piece] = []
    out: list[str] = []
    params: list[int] = []
    start = i = 0
    n = len(text)
    block = 0  # depth inside a CREATE's BEGIN [ATOMIC] ... END (CASE ... END within)

    def finish(end: int) -> None:
        chunk = "".join(out)
        stripped = chunk.strip()
        if stripped and not _only_comments(stripped):
            lead = len(chunk) - len(chunk.lstrip())
            pieces.append(Piece(stripped, start + lead, tuple(params)))

    while i < n:
        ch = text[i]
        if ch == "'":
            escaped = i > 0 and text[i - 1] in "eE" and (i < 2 or not _word(text[i - 2]))
            end = _skip_quoted(text, i, "'", escaped)
        elif ch == '"':
            end = _skip_quoted(text, i, '"', False)
        elif text.startswith("--", i):
            newline = text.find("\n", i)
            end = n if newline < 0 else newline
        elif text.startswith("/*", i):
            end = _skip_block_comment(text, i)
        elif (
            ch == "$"
            and (i == 0 or not _word(text[i - 1]))
            and (quote := _DOLLAR_QUOTE.match(text, i))
        ):
            close = text.find(quote.group(), quote.end())
            end = n if close < 0 else close + len(quote.group())
        elif ch == "$" and _placeholder_at(text, i):
            end = _DIGITS.match(text, i + 1).end()  # type: ignore[union-attr]  # one at least
            params.append(int(text[i + 1 : end]))
            out.append("?" + " " * (end - i - 1))
            i = end
            continue
        elif _word(ch) and (i == 0 or not _word(text[i - 1])) and (run := _WORD.match(text, i)):
            end = run.end()
            word = text[i:end].upper() if 3 <= end - i <= 5 else ""
            if word == "BEGIN" and _CREATE.match("".join(out)):
                block += 1  # a trigger's or procedure's body: its `;` do not end it
            elif block and word == "CASE":
                block += 1
            elif block and word == "END":
                block -= 1
        elif ch == ";" and not block:
            finish(i)
            out, params = [], []
            start = i = i + 1
            continue
        else:  # a `-`, `/` or `$` that starts nothing, a word's rest after `$1`, or a run
            plain = _PLAIN.match(text, i)
            end = i + 1 if plain is None else plain.end()
        out.append(text[i:end])
        i = end
    finish(n)
    return pieces


def _placeholder_at(text: str, i: int) -> bool:
    """`$` followed by digits and not inside a word (`a$1` is a name in PostgreSQL)."""
    return i + 1 < len(text) and text[i + 1] in _ASCII_DIGITS and (i == 0 or not _word(text[i - 1]))


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _only_comments(text: str) -> bool:
    rest = text
    while rest:
        if rest.startswith("--"):
            newline = rest.find("\n")
            rest = "" if newline < 0 else rest[newline + 1 :].lstrip()
        elif rest.startswith("/*"):
            rest = rest[_skip_block_comment(rest, 0) :].lstrip()
        else:
            return False
    return True

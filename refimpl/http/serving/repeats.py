"""A request that repeats its connection's previous one but for its `id=` value.

A long poll's client, answered, asks again at once on the same connection with the same
head but the id of its last answer (`GET /api/subscribe?query=...&id=9f3c...e1.42&wait=...`).
`Repeat` holds the bytes of such a head around its id's digits, so that the reader can take
the next head of the kind without running the parser over it: what comes is byte for byte
the previous head except the digits that end that value (an id is a subscription's name, a
dot and a version, whose digits change), one to 20 of them. Anything else (a changed byte or
header, a body, another request after it, a head cut in two) is not a repeat, and is parsed
in full.

That is as exact as the parser: the head was read whole from one receive, at the start of a
message, with no body to follow, and the digits lie inside its request target's query,
where digits are taken as they are; so the parser reads the new bytes as the same
request with that target, which is what the reader makes of them (`RequestReader.take`).
"""

from __future__ import annotations

import re

# An id's value as its answers name it: a subscription's name, a dot and a version (its
# digits, which change from answer to answer), or digits alone.
_ID = re.compile(r"(?:[0-9A-Za-z]{1,64}\.)?([0-9]{1,20})")
_DIGITS = re.compile(rb"[0-9]{1,20}")


class Repeat:
    """The bytes of one whole request head around the digits of its `id=` parameter's
    value (its version's)."""

    __slots__ = ("prefix", "suffix", "before", "after")

    def __init__(self, prefix: bytes, suffix: bytes, before: str, after: str) -> None:
        self.prefix = prefix  # the head's bytes up to the digits
        self.suffix = suffix  # and after it
        self.before = before  # the request target up to the digits
        self.after = after  # and after it

    def target(self, data: bytes) -> str | None:
        """The request target of `data` when it is this head with other digits in its id's
        value (one to 20 of them); None when it is anything else."""
        end = len(data) - len(self.suffix)  # before the start when the two overlap: no match
        if (
            not data.startswith(self.prefix)
            or not data.endswith(self.suffix)
            or _DIGITS.fullmatch(data, len(self.prefix), end) is None
        ):
            return None
        return self.before + data[len(self.prefix) : end].decode("ascii") + self.after


def repeat_of(data: bytes, method: str, target: str) -> Repeat | None:
    """The `Repeat` of a head whose bytes are `data` exactly (read from its first byte to
    its blank line, with nothing after it) and which the parser read as `method` and
    `target`; None unless the target is a path and a query with one `id=` parameter, whose
    value is an id (letters and digits, a dot and digits; or digits), and no fragment, and
    `data` begins with the method, a space, the target and a space."""
    if b"id=" not in data or not target.startswith("/") or "#" in target:
        return None
    query_at = target.find("?") + 1
    if not query_at:
        return None
    pieces = "&" + target[query_at:]
    found = pieces.find("&id=")
    if found < 0 or pieces.find("&id=", found + 1) >= 0:
        return None
    start = query_at + found + 3  # the value's place in the target
    end = target.find("&", start)
    if end < 0:
        end = len(target)
    value = _ID.fullmatch(target, start, end)
    if value is None:
        return None
    start = value.start(1)  # its digits' place
    line = f"{method} {target} ".encode("latin-1")
    if not data.startswith(line):
        return None
    at = len(method) + 1  # the target's place in `data`
    return Repeat(data[: at + start], data[at + end :], target[:start], target[end:])

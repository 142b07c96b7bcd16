"""A request that repeats its connection's previous one but for its `id=` value, or for
its body (and the Content-Length that says its size).

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

`BodyRepeat` is the same for a request with a body: an `/exec` client sends its next
statement with the head it sent before but the digits of its Content-Length. What comes is
byte for byte the previous head except those digits (a decimal number, no leading zero, up
to the reader's limits), then exactly as many bytes as they say: the body, and nothing
after it. The head was one whole request read from one receive, at a message's start, its
only Content-Length the number of its body's bytes and no Transfer-Encoding, so the parser
reads the new bytes as the same head with that length, and that body; which is what the
reader makes of them.
"""

from __future__ import annotations

import re
from typing import Protocol

# An id's value as its answers name it: a subscription's name, a dot and a version (its
# digits, which change from answer to answer), or digits alone.
_ID = re.compile(r"(?:[0-9A-Za-z]{1,64}\.)?([0-9]{1,20})")
_DIGITS = re.compile(rb"[0-9]{1,20}")
# A Content-Length's value as a repeat may say it: no leading zero (so that it is the one
# number the digits spell), and short of the 20 digits the parser's own limit allows.
_LENGTH = re.compile(rb"0|[1-9][0-9]{0,15}")
# Where a head's Content-Length field's digits begin: its name at a line's start (a field
# name is a token that ends at its colon), the colon, and any blanks.
_LENGTH_FIELD = re.compile(rb"\ncontent-length:[ \t]*", re.IGNORECASE)


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


class Head(Protocol):
    """What a repeat reads of the head the parser made (`wire.RequestHead`)."""

    @property
    def method(self) -> str: ...

    @property
    def target(self) -> str: ...


def repeat_of(
    data: bytes, head: Head, has_body: bool, body_length: int, limit: int
) -> Repeat | BodyRepeat | None:
    """The repeat of a request whose bytes are `data` exactly (read from its first byte to
    its end, nothing after it), read by the parser as `head` with a body of `body_length`
    bytes (`has_body`: it had a Content-Length; no Transfer-Encoding): a `Repeat` when its
    target has an id (and its body no byte), else a `BodyRepeat` when it has a
    Content-Length that one can follow, else None. `limit`: a repeat's largest body."""
    if not body_length:
        repeat = id_repeat_of(data, head.method, head.target)
        if repeat is not None:
            return repeat
    return body_repeat_of(data, body_length, limit) if has_body else None


def id_repeat_of(data: bytes, method: str, target: str) -> Repeat | None:
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


class BodyRepeat:
    """The bytes of one whole request head with a body around its Content-Length's digits."""

    __slots__ = ("prefix", "suffix", "limit")

    def __init__(self, prefix: bytes, suffix: bytes, limit: int) -> None:
        self.prefix = prefix  # the head's bytes up to the digits
        self.suffix = suffix  # and after them, to the head's end
        self.limit = limit  # the largest body a repeat may have (the reader's limits)

    def body(self, data: bytes) -> bytes | None:
        """The body of `data` when it is this head with another length and exactly that
        many bytes after it; None when it is anything else."""
        prefix = self.prefix
        if not data.startswith(prefix):
            return None
        digits = _LENGTH.match(data, len(prefix))
        if digits is None:
            return None
        start = digits.end()
        suffix = self.suffix
        if not data.startswith(suffix, start):
            return None
        start += len(suffix)
        size = len(data) - start
        if size > self.limit or size != int(digits[0]):
            return None
        return data[start:]


def body_repeat_of(data: bytes, body_length: int, limit: int) -> BodyRepeat | None:
    """The `BodyRepeat` of a request whose bytes are `data` exactly (read from its first
    byte to its body's last, nothing after it), which the parser read with a
    Content-Length of `body_length` and no Transfer-Encoding; None unless its head names
    Content-Length once, spelled as the decimal number itself (no leading zero) and
    followed by a line's end or blanks. `limit`: the largest body a repeat may have."""
    end = len(data) - body_length  # the head's end
    fields = _LENGTH_FIELD.findall(data, 0, end)
    if len(fields) != 1:
        return None
    found = _LENGTH_FIELD.search(data, 0, end)
    assert found is not None
    start = found.end()
    digits = _LENGTH.match(data, start, end)
    if digits is None or digits[0] != b"%d" % body_length:
        return None
    after = digits.end()
    if data[after : after + 1] not in (b"\r", b" ", b"\t"):
        return None
    return BodyRepeat(data[:start], data[after:end], limit)

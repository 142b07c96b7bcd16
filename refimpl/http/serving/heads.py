"""Answer heads kept as templates: a long poll's connection answers again and again with
heads that differ only in their Content-Length, Date and request id, and so does every
write's acknowledgement."""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.http.serving.wire import answer_bytes, head_text, http_date

if TYPE_CHECKING:
    from refimpl.http.encode import Answer


class HeadTemplate:
    """The head `wire.answer_bytes(answer, keep_alive, True, (name, value))` makes, kept
    with its Content-Length's, Date's and `value` left open: for answers that differ from
    the one it was made of in those alone, the bytes are one format of it (`bytes_of`), no
    header joined or looked at again."""

    __slots__ = ("key", "text")

    def __init__(self, answer: Answer, keep_alive: bool, name: str) -> None:
        headers = answer.headers
        # What the bytes depend on but the Content-Length's value (`bytes_of` compares).
        self.key = (answer.status, headers[0], headers[1][0], headers[2:], keep_alive, name)
        # A "%" of the text is the template's: doubled, it stands for itself.
        kept = [(n.replace("%", "%%"), v.replace("%", "%%")) for n, v in headers]
        kept[1] = (kept[1][0], "%s")  # the Content-Length's value (`template_of`)
        status = answer.status.replace("%", "%%")
        extra = (name.replace("%", "%%"), "%s")
        self.text = head_text(status, kept, False, keep_alive, extra, "%s")

    def bytes_of(self, answer: Answer, keep_alive: bool, name: str, value: str) -> bytes | None:
        """`wire.answer_bytes(answer, keep_alive, True, (name, value))` when `answer` has
        this template's status and headers but for the Content-Length's value, second;
        else None."""
        headers = answer.headers
        try:
            key = (answer.status, headers[0], headers[1][0], headers[2:], keep_alive, name)
        except IndexError:  # fewer than two headers
            return None
        if key != self.key:
            return None
        return (self.text % (headers[1][1], http_date(), value)).encode("latin-1") + answer.body


def template_of(answer: Answer, keep_alive: bool, name: str) -> HeadTemplate | None:
    """The `HeadTemplate` of `answer`'s head with the extra header `name`; None when its
    second header is not its Content-Length (the template's place for it)."""
    headers = answer.headers
    if len(headers) < 2 or headers[1][0] != "Content-Length":
        return None
    return HeadTemplate(answer, keep_alive, name)


def named_answer_bytes(
    answer: Answer, keep_alive: bool, with_body: bool, name: str, value: str
) -> bytes:
    """`wire.answer_bytes(answer, keep_alive, with_body, (name, value))`. An answer of an
    `Answer`'s own two headers alone (a write's acknowledgement, its request id the extra
    header) is made from a kept head with the Content-Length's, Date's and `value` put in:
    one format, where the general head joins and looks at its headers every time."""
    headers = answer.headers
    if with_body and len(headers) == 2:
        (kind, kind_value), (length, length_value) = headers
        if kind == "Content-Type" and length == "Content-Length":
            key = (answer.status, kind_value, keep_alive, name)
            text = _named_heads.get(key) or _named_head(*key)
            return (text % (length_value, http_date(), value)).encode("latin-1") + answer.body
    return answer_bytes(answer, keep_alive, with_body, (name, value))


# `named_answer_bytes`' heads by status, content type, keep-alive and the extra header's
# name; bounded, though the few statuses and types of acknowledgements fill it.
_named_heads: dict[tuple[str, str, bool, str], str] = {}


def _named_head(status: str, kind: str, keep_alive: bool, name: str) -> str:
    if len(_named_heads) >= 64:
        _named_heads.clear()
    # A "%" of the text is the template's: doubled, it stands for itself.
    fields = [("Content-Type", kind.replace("%", "%%")), ("Content-Length", "%s")]
    extra = (name.replace("%", "%%"), "%s")
    text = head_text(status.replace("%", "%%"), fields, False, keep_alive, extra, "%s")
    _named_heads[status, kind, keep_alive, name] = text
    return text

"""Answer heads kept as templates: a long poll's connection answers again and again with
heads that differ only in their Content-Length, Date and request id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from refimpl.http.serving.wire import head_text, http_date

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

"""The SQL of a form-encoded `POST /exec` body: the field `query`, or the body itself.

`curl -d 'SELECT 1' URL` sends its text as it is, labelled
`application/x-www-form-urlencoded`: form-decoded, it would be one field named `SELECT 1`
(and `+` would turn into a space, `%a%` into garbage). A form encoder, though, never writes
a space or a line break (it writes `+` and `%0A`), while SQL nearly always has one. So:

- a body starting with `query=` is a form: its field `query` is the SQL, form-decoded;
- a body with whitespace, or without any `=`, is not one a form encoder wrote: it is the SQL,
  byte for byte (no `+` or `%` decoding);
- anything else (`name=value` pairs, none named `query`) is refused, naming curl's `-d` and
  the two ways that work.

Imports nothing of the engine: a pure function of the body's bytes.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from refimpl.errors import BadRequest

FORM_FIELD = "query"
WHITESPACE = (b" ", b"\t", b"\r", b"\n")
# The two ways that work, shown in every refusal of a form body.
WAYS_THAT_WORK = (
    "send the SQL as the body (curl --data-binary 'SELECT 1' -H 'Content-Type: text/plain')"
    " or as the form field query (curl --data-urlencode 'query=SELECT 1')"
)


def sql_of_form_body(body: bytes) -> str | None:
    """The SQL of a form-encoded body (None when it is empty); BadRequest for a form without
    the field `query`, or with others beside it."""
    if not body.strip():
        return None
    if not body.startswith(f"{FORM_FIELD}=".encode()):
        if any(space in body for space in WHITESPACE) or b"=" not in body:
            return _utf8(body, "the body")
        fields = _form_fields(body)
        names = ", ".join(f"'{name}'" for name in dict.fromkeys(name for name, _ in fields))
        raise BadRequest(
            f"the body is form-encoded (as curl -d sends it) with the field(s) {names}, and"
            f" /exec takes only the field '{FORM_FIELD}'; {WAYS_THAT_WORK}"
        )
    fields = _form_fields(body)
    unknown = sorted({name for name, _ in fields} - {FORM_FIELD})
    if unknown:
        names = ", ".join(f"'{name}'" for name in unknown)
        raise BadRequest(f"unknown form field(s) {names}; /exec takes only '{FORM_FIELD}'")
    if len(fields) > 1:
        count = len(fields)
        raise BadRequest(f"the form field '{FORM_FIELD}' is given {count} times; give it once")
    return fields[0][1]


def _form_fields(body: bytes) -> list[tuple[str, str]]:
    try:
        return parse_qsl(_utf8(body, "the form"), keep_blank_values=True, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("the form is not valid UTF-8 once decoded") from None


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequest(f"{what} is not valid UTF-8 (byte {exc.start + 1})") from None

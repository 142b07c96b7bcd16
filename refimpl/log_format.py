"""How the server's log lines look on stderr: text for people, JSON lines for machines.

`configure(log_format)` sets up the root logger once per process (the `refimpl serve`
command calls it). In JSON each line is one object: `time` (ISO-8601 UTC), `level`,
`logger`, `message`, and the fields a line carries (a request's line: `request_id`, `method`,
`path`, `query`, `route`, `status`, `duration_ms`, `client`; see `refimpl.http.request_log`),
plus `error` with the traceback when one is logged.

A line is a record, whatever a client sent: in text, the message's control characters (C0,
DEL, C1, the Unicode line and paragraph separators) are written as `\\xNN` or `\\uNNNN`
(`escape_controls`) and a traceback's lines are indented by two spaces, so that no line
after a record's first starts as a record does (with its time); in JSON, the encoder
escapes them inside the strings, U+0085, U+2028 and U+2029 included.
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
from typing import Any

import msgspec

TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"
_encode = msgspec.json.Encoder(enc_hook=str).encode  # what JSON cannot hold, as text
TRACEBACK_INDENT = "  "

_ESCAPES = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPES |= {0x2028: "\\u2028", 0x2029: "\\u2029"}
# Line breaks to str.splitlines() and some readers that JSON leaves raw in a string.
_JSON_BREAKS = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def escape_controls(text: str) -> str:
    """`text` with every control character (C0, DEL, C1) and the Unicode line and paragraph
    separators written as `\\xNN` or `\\uNNNN`: one line, whatever it held."""
    # Every character escaped is one `str.isprintable` refuses: most texts cost one C scan.
    return text if text.isprintable() else text.translate(_ESCAPES)


_MSEC_FORMAT = "%s,%03d"  # logging.Formatter's default_msec_format
_MILLISECONDS = tuple(f"{n:03d}" for n in range(1000))


class TextLineFormatter(logging.Formatter):
    """TEXT_FORMAT lines: the message on the record's one line, a traceback indented."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")  # the last second's text, made once

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 - logging's name
        """`logging.Formatter.formatTime`, its second's text made once a second."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self._time_text(record.created, record.msecs)

    def _time_text(self, created: float, msecs: float) -> str:
        text = self._second_text(created, int(created))
        msec_format = self.default_msec_format
        return text if msec_format is None else msec_format % (text, msecs)

    def _second_text(self, created: float, second: int) -> str:
        """The time's text up to its milliseconds; `second`: `int(created)`."""
        kept, text = self._second
        if kept != second:
            text = time.strftime(self.default_time_format, self.converter(created))
            self._second = (second, text)
        return text

    def info_start(self, created: float) -> str | None:
        """What `format` makes of an INFO record made at `created` before its message (its
        time and level): a caller that escaped its message's parts itself (`escape_controls`)
        puts them after it; None when this formatter's format or time format is not the
        default."""
        if self._fmt != TEXT_FORMAT or self.datefmt is not None:
            return None
        second = int(created)
        msecs = int((created - second) * 1000)  # a LogRecord's, as an int
        if 0 <= msecs < 1000 and self.default_msec_format == _MSEC_FORMAT:
            # "%03d" of them from a table: a format's parse and a float's conversion to an
            # int cost more than the rest of the time's text.
            return f"{self._second_text(created, second)},{_MILLISECONDS[msecs]} INFO "
        return f"{self._time_text(created, msecs)} INFO "

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = escape_controls(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802 - logging's name
        return _indented(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:  # noqa: N802 - logging's name
        return _indented(super().formatStack(stack_info))


def _indented(text: str) -> str:
    return "\n".join(TRACEBACK_INDENT + escape_controls(line) for line in text.split("\n"))


class JsonLineFormatter(logging.Formatter):
    """One JSON object a record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        moment = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, object] = {
            "time": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line.update(fields)
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        text = _encode(line).decode("utf-8")
        return text if text.isascii() else text.translate(_JSON_BREAKS)  # ASCII: no break


def configure(log_format: str) -> None:
    """Log INFO and above to stderr, as `text` or `json` lines.

    Neither format shows where a line was logged from, nor its thread or process, so a
    record does not look them up (the logging HOWTO's "Optimization"): finding the caller
    walks the stack, and a request's line is made on the request path.
    """
    logging._srcfile = None  # the switch the HOWTO documents: no findCaller()
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonLineFormatter())
    else:
        handler.setFormatter(TextLineFormatter())
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

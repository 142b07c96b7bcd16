"""How the server's log lines look on stderr: text for people, JSON lines for machines.

`configure(log_format)` sets up the root logger once per process (the `refimpl serve`
command calls it). In JSON each line is one object: `time` (ISO-8601 UTC), `level`,
`logger`, `message`, and the fields a line carries (a request's line: `request_id`, `method`,
`path`, `query`, `route`, `status`, `duration_ms`, `client`; see `refimpl.http.request_log`),
plus `error` with the traceback when one is logged.
"""

from __future__ import annotations

import datetime
import logging
import sys

import msgspec

TEXT_FORMAT = "%(asctime)s %(levelname)s %(message)s"
_encode = msgspec.json.Encoder(enc_hook=str).encode  # what JSON cannot hold, as text


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
        return _encode(line).decode("utf-8")


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
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)

"""The messages of PostgreSQL's streaming replication protocol, as `pg` steps write them.

After `START_REPLICATION` a connection is in CopyBoth mode: both sides send `CopyData`,
and the first byte of each says what it holds. A `pg` step reads the server's as

- `{"type": "XLogData", "start": "X/Y", "end": "X/Y", "time": N, "data": ...}` (`w`): the
  message's start and end positions, the server's time (microseconds since 2000-01-01),
  and the output plugin's bytes: text (test_decoding's lines) or, with the step's
  `"plugin": "pgoutput"`, the decoded pgoutput message below;
- `{"type": "PrimaryKeepalive", "end": "X/Y", "time": N, "reply": true}` (`k`): the
  position sent up to, the time, whether a reply is asked for;
- `{"type": "CopyData", "data": "TEXT"}`: any other (`malformed` and `hex` instead of
  `data` for a `w` or `k` too short for its fields);

and sends the client's `{"StandbyStatusUpdate": {"written": "X/Y", "flushed": "X/Y",
"applied": "X/Y", "reply": false}}` (`r`): the positions written, flushed and applied
(`flushed` and `applied` default to `written`), the client's time, and whether it asks
for a reply.

A pgoutput message is an object whose `kind` is its first byte, with its fields named as
PostgreSQL's documentation of the logical replication protocol names them:

| kind | fields |
|---|---|
| `B` Begin | `final_lsn`, `commit_time`, `xid` |
| `C` Commit | `flags`, `commit_lsn`, `end_lsn`, `commit_time` |
| `O` Origin | `commit_lsn`, `name` |
| `R` Relation | `relation` (OID), `namespace`, `name`, `replica_identity`, `columns` |
| `Y` Type | `type_oid`, `namespace`, `name` |
| `I` Insert | `relation`, `new` |
| `U` Update | `relation`, `key` or `old` (when sent), `new` |
| `D` Delete | `relation`, `key` or `old` |
| `T` Truncate | `options`, `relations` (OIDs) |
| `M` Message | `transactional`, `lsn`, `prefix`, `content` (text) |

A Relation's `replica_identity` is `d`, `n`, `f` or `i`, each of its `columns`
`{"key", "name", "type_oid", "type_modifier"}`.

A tuple (`new`, `old`, `key`) is the list of its values: text, `null`, `"\\x..."` hex for a
binary one, `{"unchanged": true}` for an unchanged TOASTed one. Positions are written as
PostgreSQL writes an LSN, `X/Y` (upper-case hex); times are integers. Any other kind is
`{"kind", "bytes"}` (hex). Imports nothing of the implementation under test.
"""

from __future__ import annotations

import struct
import time
from typing import Any

# PostgreSQL's epoch (2000-01-01) in Unix microseconds.
PG_EPOCH_MICROS = 946_684_800_000_000
_XLOG = struct.Struct("!qqq")
_KEEPALIVE = struct.Struct("!qqB")
_STANDBY = struct.Struct("!cqqqqB")


class ReplicationMessageError(Exception):
    """A replication message could not be written or read."""


def lsn_text(position: int) -> str:
    """A 64-bit position as PostgreSQL writes an LSN: `X/Y`, upper-case hex."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """`X/Y` as its 64-bit position; ReplicationMessageError when it is not one."""
    high, slash, low = str(text).partition("/")
    try:
        if not slash:
            raise ValueError
        return (int(high, 16) << 32) | int(low, 16)
    except ValueError:
        raise ReplicationMessageError(f"{text!r} is no position: write X/Y, e.g. 0/2FFF") from None


def standby_status_update(fields: Any) -> bytes:
    """The payload (`r` ...) of the client's standby status update written as JSON."""
    if not isinstance(fields, dict) or "written" not in fields:
        raise ReplicationMessageError(
            "StandbyStatusUpdate takes an object with 'written' (X/Y), and 'flushed',"
            f" 'applied', 'reply' when they differ: {fields!r}"
        )
    unknown = set(fields) - {"written", "flushed", "applied", "reply"}
    if unknown:
        raise ReplicationMessageError(f"StandbyStatusUpdate has no field {sorted(unknown)}")
    written = parse_lsn(str(fields["written"]))
    flushed = parse_lsn(str(fields.get("flushed", fields["written"])))
    applied = parse_lsn(str(fields.get("applied", fields.get("flushed", fields["written"]))))
    now = time.time_ns() // 1000 - PG_EPOCH_MICROS
    reply = 1 if fields.get("reply", False) else 0
    return _STANDBY.pack(b"r", written, flushed, applied, now, reply)


def decode_stream_data(body: bytes, plugin: str | None) -> dict[str, Any]:
    """A CopyData of the server while streaming, as JSON (see the module's table)."""
    try:
        if body[:1] == b"w":
            start, end, sent_at = _XLOG.unpack_from(body, 1)
            payload = body[1 + _XLOG.size :]
            data: Any = (
                decode_pgoutput(payload)
                if plugin == "pgoutput"
                else payload.decode("utf-8", "replace")
            )
            return {
                "type": "XLogData",
                "start": lsn_text(start),
                "end": lsn_text(end),
                "time": sent_at,
                "data": data,
            }
        if body[:1] == b"k":
            end, sent_at, reply = _KEEPALIVE.unpack_from(body, 1)
            return {
                "type": "PrimaryKeepalive",
                "end": lsn_text(end),
                "time": sent_at,
                "reply": bool(reply),
            }
    except (struct.error, IndexError, ValueError) as exc:
        return {"type": "CopyData", "malformed": f"{body[:1]!r}: {exc}", "hex": body.hex()}
    return {"type": "CopyData", "data": body.decode("utf-8", "replace")}


class _Reader:
    """Reads a pgoutput message's fields in order; struct.error/IndexError past its end."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value[0] if len(value) == 1 else value

    def lsn(self) -> str:
        return lsn_text(self.take("!q"))

    def cstring(self) -> str:
        end = self.data.index(b"\0", self.at)
        text = self.data[self.at : end].decode("utf-8", "replace")
        self.at = end + 1
        return text

    def byte(self) -> str:
        value = self.data[self.at : self.at + 1]
        if not value:
            raise IndexError("the message ends early")
        self.at += 1
        return value.decode("ascii", "replace")

    def tuple(self) -> list[Any]:
        values: list[Any] = []
        for _ in range(self.take("!h")):
            kind = self.byte()
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append({"unchanged": True})
            elif kind in ("t", "b"):
                length = self.take("!i")
                raw = self.data[self.at : self.at + length]
                if len(raw) != length:
                    raise IndexError("a value ends past the message")
                self.at += length
                values.append(raw.decode("utf-8", "replace") if kind == "t" else "\\x" + raw.hex())
            else:
                raise ValueError(f"a tuple value of kind {kind!r}")
        return values


def decode_pgoutput(data: bytes) -> dict[str, Any]:
    """One pgoutput message as JSON (see the module's table)."""
    reader = _Reader(data)
    kind = reader.byte()
    out: dict[str, Any] = {"kind": kind}
    if kind == "B":
        out.update(final_lsn=reader.lsn(), commit_time=reader.take("!q"), xid=reader.take("!I"))
    elif kind == "C":
        out.update(
            flags=reader.take("!B"),
            commit_lsn=reader.lsn(),
            end_lsn=reader.lsn(),
            commit_time=reader.take("!q"),
        )
    elif kind == "O":
        out.update(commit_lsn=reader.lsn(), name=reader.cstring())
    elif kind == "R":
        out.update(
            relation=reader.take("!I"),
            namespace=reader.cstring(),
            name=reader.cstring(),
            replica_identity=reader.byte(),
        )
        columns = []
        for _ in range(reader.take("!h")):
            flags = reader.take("!B")
            name = reader.cstring()
            type_oid, modifier = reader.take("!Ii")
            columns.append(
                {
                    "key": bool(flags & 1),
                    "name": name,
                    "type_oid": type_oid,
                    "type_modifier": modifier,
                }
            )
        out["columns"] = columns
    elif kind == "Y":
        out.update(type_oid=reader.take("!I"), namespace=reader.cstring(), name=reader.cstring())
    elif kind in ("I", "U", "D"):
        out["relation"] = reader.take("!I")
        while reader.at < len(data):
            part = reader.byte()
            marked = {"N": "new", "K": "key", "O": "old"}.get(part)
            if marked is None:
                raise ValueError(f"a tuple marked {part!r}")
            out[marked] = reader.tuple()
    elif kind == "T":
        count, options = reader.take("!IB")
        out.update(options=options, relations=[reader.take("!I") for _ in range(count)])
    elif kind == "M":
        out.update(transactional=bool(reader.take("!B")), lsn=reader.lsn(), prefix=reader.cstring())
        length = reader.take("!i")
        out["content"] = data[reader.at : reader.at + length].decode("utf-8", "replace")
        reader.at += length
    else:
        return {"kind": kind, "bytes": data[1:].hex()}
    if reader.at != len(data):
        out["trailing"] = data[reader.at :].hex()  # never matches an expectation: a wrong length
    return out

"""The session settings drivers and psql set and show: SET, SHOW, RESET, DISCARD ALL.

These statements are the protocol's, not the engine's: they change nothing in a database.
A setting the server reports (`REPORTED`) goes to the client as ParameterStatus at the
startup and whenever SET changes it. Values are kept as given, except that
`client_encoding` must be UTF-8 (the only encoding served) and `TimeZone` is accepted but
changes nothing: timestamps are always written in UTC, with their `+00` offset.
`lock_timeout` and `idle_in_transaction_session_timeout` are honoured (milliseconds, or
with a unit), their defaults the server's. As in PostgreSQL, a SET inside a transaction is
undone if the transaction rolls back, and a SET LOCAL lasts until the transaction ends.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from refimpl.errors import BadRequest, NotAllowed, SqlError, UnknownSetting

SERVER_VERSION = "15.0"

DEFAULTS: dict[str, str] = {
    "server_version": SERVER_VERSION,
    "server_version_num": "150000",
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "IntervalStyle": "postgres",
    "TimeZone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "application_name": "",
    "search_path": '"$user", public',
    "extra_float_digits": "1",
    "statement_timeout": "0",
    "lock_timeout": "0",
    "idle_in_transaction_session_timeout": "0",
    "default_transaction_isolation": "serializable",
    "transaction_isolation": "serializable",
    "default_transaction_read_only": "off",
    "max_identifier_length": "63",
    "bytea_output": "hex",
    "client_min_messages": "notice",
    "row_security": "on",
    "jit": "off",
    "is_superuser": "off",
    "session_authorization": "",
}
READ_ONLY = frozenset(
    {
        "server_version",
        "server_version_num",
        "server_encoding",
        "integer_datetimes",
        "max_identifier_length",
        "is_superuser",
        "session_authorization",
    }
)
REPORTED = (
    "server_version",
    "server_encoding",
    "client_encoding",
    "DateStyle",
    "IntervalStyle",
    "TimeZone",
    "integer_datetimes",
    "standard_conforming_strings",
    "application_name",
    "is_superuser",
    "session_authorization",
)
_BY_LOWER = {name.lower(): name for name in DEFAULTS}
_UTF8 = frozenset({"utf8", "utf-8", "unicode"})

_SET = re.compile(
    r"^set\s+(?:(session|local)\s+)?(?:time\s+zone\s+(?P<zone>.+)|(?P<name>[a-z_][\w.]*)"
    r"\s*(?:=|\s+to\s+|\s+)(?P<value>.+))$",
    re.IGNORECASE | re.DOTALL,
)
_SHOW = re.compile(r"^show\s+(?P<name>[a-z_][\w.]*|all)$", re.IGNORECASE)
# The SQL standard's spellings of two settings, as SQLAlchemy and psql send them.
_SHOW_WORDS = {"transaction isolation level": "transaction_isolation", "time zone": "TimeZone"}
# SET [SESSION CHARACTERISTICS AS] TRANSACTION <modes>: the transaction's (or, with SESSION
# CHARACTERISTICS, every later transaction's) isolation level and access mode.
_SET_TRANSACTION = re.compile(
    r"^set\s+(?P<session>session\s+characteristics\s+as\s+)?transaction\s+(?P<modes>.+)$",
    re.IGNORECASE | re.DOTALL,
)
_MODE = re.compile(
    r"\s*(?:isolation\s+level\s+(?P<level>serializable|repeatable\s+read|read\s+committed"
    r"|read\s+uncommitted)|(?P<access>read\s+write|read\s+only)|(?P<deferrable>(?:not\s+)?"
    r"deferrable))\s*(?:,|$)",
    re.IGNORECASE,
)
ISOLATION_LEVELS = frozenset(
    {"serializable", "repeatable read", "read committed", "read uncommitted"}
)
_RESET = re.compile(r"^reset\s+(?P<name>[a-z_][\w.]*|all)$", re.IGNORECASE)
_DISCARD = re.compile(r"^discard\s+all$", re.IGNORECASE)
# psycopg sends DEALLOCATE ALL after every ALTER or DROP, to forget its prepared statements.
_DEALLOCATE = re.compile(
    r'^deallocate\s+(?:prepare\s+)?(?:(?P<all>all)|"?(?P<name>[^"]+)"?)$', re.IGNORECASE
)
# SHOW statements of the engine itself: these are never session settings.
_ENGINE_SHOWS = frozenset(
    {"tables", "columns", "create", "users", "grants", "triggers", "procedures", "databases"}
)


@dataclass(frozen=True, slots=True)
class SettingCommand:
    """A recognised SET / SHOW / RESET / DISCARD / DEALLOCATE: `verb` and, for SET, the
    value's text (DEALLOCATE: the prepared statement's name, None for ALL)."""

    verb: str  # "SET", "SHOW", "RESET", "DISCARD", "DEALLOCATE"
    name: str | None = None
    value: str | None = None
    local: bool = False  # SET LOCAL: until the transaction ends


# The first letters of the commands `recognise` reads, as its patterns match them (`ſ`, a
# long s, is an `s` to a pattern that ignores case); none has an `l` third (SET, SHOW,
# RESET, DISCARD, DEALLOCATE), which SELECT and DELETE have.
_FIRST_LETTERS = frozenset("sSrRdDſ")
_NOT_THIRD = ("l", "L")


def recognise(text: str) -> SettingCommand | None:
    """The setting command `text` is, or None when it is a statement for the engine."""
    stripped = text.strip().rstrip(";").strip()
    if stripped[:1] not in _FIRST_LETTERS or stripped[2:3] in _NOT_THIRD:
        return None  # a SELECT, an INSERT, ...: two tests, no pattern tried
    return read_setting(stripped)


def read_setting(stripped: str) -> SettingCommand | None:
    """`recognise` of a text stripped of its spaces and final `;`, by every pattern."""
    if match := _SET_TRANSACTION.match(stripped):
        name = "default_transaction_isolation" if match["session"] else "transaction_isolation"
        return SettingCommand("SET", name, _transaction_modes(match["modes"]))
    words = " ".join(stripped.split()[1:]).lower()
    if stripped[:4].lower() == "show" and words in _SHOW_WORDS:
        return SettingCommand("SHOW", _SHOW_WORDS[words])
    if match := _SET.match(stripped):
        if match["zone"] is not None:
            return SettingCommand("SET", "TimeZone", _unquote(match["zone"]))
        local = (match[1] or "").lower() == "local"
        return SettingCommand("SET", match["name"], _unquote(match["value"]), local)
    if (match := _SHOW.match(stripped)) and match["name"].lower() not in _ENGINE_SHOWS:
        return SettingCommand("SHOW", match["name"])
    if match := _RESET.match(stripped):
        return SettingCommand("RESET", match["name"])
    if _DISCARD.match(stripped):
        return SettingCommand("DISCARD")
    if match := _DEALLOCATE.match(stripped):
        return SettingCommand("DEALLOCATE", None if match["all"] else match["name"])
    return None


def _transaction_modes(modes: str) -> str:
    """The isolation level a list of transaction modes sets (the level in force when it
    names none); READ ONLY and DEFERRABLE are refused as not supported."""
    level = ""
    at = 0
    while at < len(modes):
        match = _MODE.match(modes, at)
        if match is None or match.end() == at:
            raise SqlError(
                f"cannot read the transaction modes {modes.strip()!r}; write ISOLATION LEVEL"
                " SERIALIZABLE (or another level), READ WRITE"
            )
        if match["access"] and match["access"].lower().split()[-1] == "only":
            raise NotAllowed(
                "READ ONLY transactions are not supported; every transaction here may write."
                " Leave the access mode out (READ WRITE)"
            )
        if match["deferrable"] and not match["deferrable"].lower().startswith("not"):
            raise NotAllowed("DEFERRABLE transactions are not supported; leave the mode out")
        if match["level"]:
            level = " ".join(match["level"].lower().split())
        at = match.end()
    return level or "default"


def _unquote(value: str) -> str:
    parts = [part.strip() for part in value.strip().split(",")]
    cleaned = []
    for part in parts:
        if len(part) >= 2 and part[0] == part[-1] == "'":
            part = part[1:-1].replace("''", "'")
        cleaned.append(part)
    return ", ".join(cleaned) if len(cleaned) > 1 else cleaned[0]


# The settings of a time, in milliseconds (PostgreSQL's unit for them): their units, and
# how SHOW writes them (the largest unit that divides the value, as PostgreSQL does).
TIMEOUTS = frozenset({"lock_timeout", "idle_in_transaction_session_timeout"})
_TIME = re.compile(r"^\s*(\d+(?:\.\d*)?)\s*(ms|s|min|h|d)?\s*$", re.IGNORECASE)
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000), ("ms", 1))
_MAX_MS = 2_147_483_647  # PostgreSQL's bound (INT_MAX milliseconds)


def timeout_text(milliseconds: int) -> str:
    """A timeout as PostgreSQL's SHOW writes it: 0, 200ms, 5s, 1min, ..."""
    if not milliseconds:
        return "0"
    unit, size = next((u, n) for u, n in _UNITS if milliseconds % n == 0)
    return f"{milliseconds // size}{unit}"


def _milliseconds(name: str, value: str) -> int:
    match = _TIME.match(value)
    if match is not None:
        milliseconds = round(float(match[1]) * dict(_UNITS)[(match[2] or "ms").lower()])
        if milliseconds <= _MAX_MS:
            return milliseconds
    raise BadRequest(
        f'invalid value for parameter "{name}": "{value}"; give milliseconds, or a number'
        f" with a unit (ms, s, min, h, d), up to {_MAX_MS} ms; 0 turns it off"
    )


class SessionSettings:
    """One connection's settings; `set` answers the names whose reported value changed.

    `server` gives the server's defaults of some (`lock_timeout`, ...), which RESET and SET
    ... TO DEFAULT go back to. Inside a transaction, `begin_transaction` keeps what the
    values were, and `end_transaction` keeps or undoes what SET changed since."""

    def __init__(
        self,
        startup: dict[str, str],
        user: str,
        is_admin: bool,
        server: Mapping[str, str] | None = None,
    ) -> None:
        self.defaults = {**DEFAULTS, **(server or {})}
        for name in TIMEOUTS:
            self.defaults[name] = self._checked(name, self.defaults[name])
        self.values = dict(self.defaults)
        # In a transaction that SET changed: the values before it (what a rollback gives
        # back) and the values a commit keeps (without SET LOCAL's).
        self._before: dict[str, str] | None = None
        self._kept: dict[str, str] = {}
        # Reported settings the end of a transaction changed, not yet told the client.
        self.unreported: list[str] = []
        # The transaction's savepoints, oldest first: a name, and the values and the
        # values to keep as they were when it was made (ROLLBACK TO gives them back).
        self._marks: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.values["session_authorization"] = user
        self.values["is_superuser"] = "on" if is_admin else "off"
        for name, value in startup.items():
            known = _BY_LOWER.get(name.lower())
            if known is not None and known not in READ_ONLY:
                self.values[known] = self._checked(known, value)

    def canonical(self, name: str) -> str:
        known = _BY_LOWER.get(name.lower())
        if known is None and "." not in name:
            raise UnknownSetting(f'unrecognized configuration parameter "{name}"')
        return known or name.lower()

    def show(self, name: str) -> str:
        known = self.canonical(name)
        if known not in self.values:
            raise UnknownSetting(f'unrecognized configuration parameter "{name}"')
        return self.values[known]

    def set(self, name: str, value: str, local: bool = False) -> list[str]:
        """SET (`local`: SET LOCAL, which a commit does not keep; outside a transaction,
        where `begin_transaction` was not called, it changes nothing, as in PostgreSQL)."""
        known = self.canonical(name)
        if known in READ_ONLY:
            raise SqlError(f'parameter "{known}" cannot be changed')
        if value.lower() == "default":
            value = self.defaults.get(known, "")
        value = self._checked(known, value)
        if local and self._before is None:
            return []
        if not local and self._before is not None:
            self._kept[known] = value
        changed = self.values.get(known) != value
        self.values[known] = value
        return [known] if changed and known in REPORTED else []

    def reset(self, name: str) -> list[str]:
        if name.lower() == "all":
            changed = [n for n in REPORTED if self.values[n] != self.defaults[n]]
            for known, value in self.defaults.items():
                if known not in READ_ONLY:
                    self.set(known, value)
            return [n for n in changed if n not in READ_ONLY]
        return self.set(name, "default")

    def seconds(self, name: str) -> float:
        """A timeout's value in seconds (0: off)."""
        return _milliseconds(name, self.values[name]) / 1000

    def begin_transaction(self) -> bool:
        """Before a SET inside a transaction: True when it is the transaction's first, whose
        end must then be told (`end_transaction`)."""
        if self._before is not None:
            return False
        self._before, self._kept = dict(self.values), dict(self.values)
        return True

    def savepoint(self, name: str) -> None:
        """SAVEPOINT `name` (inside a transaction `begin_transaction` was told of)."""
        self._marks.append((name.lower(), dict(self.values), dict(self._kept)))

    def release(self, name: str) -> None:
        """RELEASE `name`: it and the savepoints after it are forgotten; values stay."""
        del self._marks[self._mark(name) :]

    def rollback_to(self, name: str) -> None:
        """ROLLBACK TO `name`: the values as they were when it was made (it stays)."""
        at = self._mark(name)
        del self._marks[at + 1 :]
        self._restore(dict(self._marks[at][1]), dict(self._marks[at][2]))

    def _mark(self, name: str) -> int:
        names = [mark[0] for mark in self._marks]
        return len(names) - 1 - names[::-1].index(name.lower())  # the engine checked it

    def transaction_failed(self) -> None:
        """An error failed the transaction: what SET changed in it since its last savepoint
        is undone at once, as PostgreSQL's abort of the (sub)transaction undoes it."""
        if self._before is not None:
            _, values, kept = self._marks[-1] if self._marks else ("", self._before, self._before)
            if self.values != values:
                self._restore(dict(values), dict(kept))

    def _restore(self, values: dict[str, str], kept: dict[str, str]) -> None:
        self.unreported += [n for n in REPORTED if values[n] != self.values[n]]
        self.values, self._kept = values, kept

    def end_transaction(self, committed: bool) -> None:
        """The transaction ended: a commit keeps what SET (not SET LOCAL) changed, a
        rollback undoes it all; the reported settings that changed so are `unreported`."""
        assert self._before is not None
        now = self._kept if committed else self._before
        self._before = None
        self._marks.clear()
        self.unreported += [name for name in REPORTED if now[name] != self.values[name]]
        self.values = now

    def _checked(self, name: str, value: str) -> str:
        if name in ("transaction_isolation", "default_transaction_isolation"):
            # Every transaction holds its database's write lock from BEGIN to COMMIT, so it
            # is serializable: a weaker level asked for is given a stronger one, which the
            # SQL standard allows; the level asked for is what SHOW answers.
            level = " ".join(value.lower().replace("_", " ").split())
            if level not in ISOLATION_LEVELS:
                raise BadRequest(
                    f'invalid value for parameter "{name}": "{value}"; the levels are'
                    " serializable, repeatable read, read committed and read uncommitted"
                )
            return level
        if name == "default_transaction_read_only":
            if value.lower() in ("on", "true", "yes", "1"):
                raise NotAllowed(
                    "READ ONLY transactions are not supported; every transaction here may"
                    " write. Set default_transaction_read_only to off"
                )
            return "off"
        if name in TIMEOUTS:
            return timeout_text(_milliseconds(name, value))
        if name == "client_encoding":
            if value.strip("'\"").lower() not in _UTF8:
                raise BadRequest(
                    f"client_encoding {value} is not served; this server speaks UTF8 only"
                )
            return "UTF8"
        return value

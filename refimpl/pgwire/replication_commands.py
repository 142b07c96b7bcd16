"""The replication commands a `replication=database` connection takes, apart from SQL.

PostgreSQL reads them with a grammar of their own (not SQL's), and so does this module:

    IDENTIFY_SYSTEM
    READ_REPLICATION_SLOT slot
    CREATE_REPLICATION_SLOT slot [TEMPORARY] LOGICAL plugin [options]
    CREATE_REPLICATION_SLOT slot [TEMPORARY] PHYSICAL [RESERVE_WAL | (options)]
    DROP_REPLICATION_SLOT slot [WAIT]
    START_REPLICATION SLOT slot LOGICAL X/Y [(name ['value'] [, ...])]
    START_REPLICATION [SLOT slot] [PHYSICAL] X/Y [TIMELINE n], TIMELINE_HISTORY n,
    BASE_BACKUP ..., ALTER_REPLICATION_SLOT ...: known, to be refused

A name is an identifier (folded to lower case) or "quoted"; a value a 'string', a number or
a name. `parse(text)` answers None for a text that is no replication command (it goes to
SQL, as PostgreSQL sends it), the command otherwise, and raises ReplicationSyntaxError
(SQLSTATE 42601) for one that starts as a command and then does not follow its grammar.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NoReturn

from refimpl.engine import replication_positions as positions
from refimpl.errors import BadRequest, ReplicationSyntaxError

COMMANDS = frozenset(
    {
        "IDENTIFY_SYSTEM",
        "READ_REPLICATION_SLOT",
        "CREATE_REPLICATION_SLOT",
        "DROP_REPLICATION_SLOT",
        "START_REPLICATION",
        "TIMELINE_HISTORY",
        "BASE_BACKUP",
        "ALTER_REPLICATION_SLOT",
        "UPLOAD_MANIFEST",
    }
)
_TOKEN = re.compile(
    r"""\s*(?:
      (?P<lsn>[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8})
    | (?P<quoted>"(?:[^"]|"")*")
    | (?P<string>'(?:[^']|'')*')
    | (?P<number>[0-9]+)
    | (?P<word>[A-Za-z_][A-Za-z0-9_$-]*)
    | (?P<punct>[(),;])
    )""",
    re.VERBOSE,
)


Options = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True)
class IdentifySystem:
    pass


@dataclass(frozen=True, slots=True)
class ReadSlot:
    name: str


@dataclass(frozen=True, slots=True)
class CreateSlot:
    name: str
    temporary: bool
    logical: bool
    plugin: str | None
    options: Options  # the legacy words (EXPORT_SNAPSHOT, ...) as (word, None)


@dataclass(frozen=True, slots=True)
class DropSlot:
    name: str
    wait: bool


@dataclass(frozen=True, slots=True)
class StartReplication:
    slot: str | None
    position: int
    options: Options


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A command this server reads only to refuse (physical replication's)."""

    command: str


Command = IdentifySystem | ReadSlot | CreateSlot | DropSlot | StartReplication | Unsupported


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str  # a name folded or unquoted, a string unquoted, a word as written

    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


def parse(text: str) -> Command | None:
    """The replication command of `text`, or None when it is SQL."""
    head = text.lstrip().split(None, 1)
    if not head or head[0].rstrip(";").upper() not in COMMANDS:
        return None
    return _Parser(text).command()


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.at = 0

    def command(self) -> Command:
        word = self._next().upper()
        command: Command
        if word == "IDENTIFY_SYSTEM":
            command = IdentifySystem()
        elif word == "READ_REPLICATION_SLOT":
            command = ReadSlot(self._name("a slot name"))
        elif word == "CREATE_REPLICATION_SLOT":
            command = self._create()
        elif word == "DROP_REPLICATION_SLOT":
            name = self._name("a slot name")
            command = DropSlot(name, self._word_if("WAIT"))
        elif word == "START_REPLICATION":
            started = self._start()
            if started is None:  # physical: the rest is not read
                return Unsupported("START_REPLICATION PHYSICAL")
            command = started
        else:
            return Unsupported(word)
        self._word_if(";", punct=True)
        if self.at < len(self.tokens):
            self._fail(f"unexpected {self.tokens[self.at].text!r} at the end of {word}")
        return command

    def _create(self) -> CreateSlot:
        name = self._name("a slot name")
        temporary = self._word_if("TEMPORARY")
        kind = self._next().upper()
        if kind == "PHYSICAL":
            return CreateSlot(name, temporary, False, None, self._slot_options())
        if kind != "LOGICAL":
            self._fail("CREATE_REPLICATION_SLOT takes LOGICAL or PHYSICAL after the slot name")
        plugin = self._name("an output plugin's name")
        return CreateSlot(name, temporary, True, plugin, self._slot_options())

    def _slot_options(self) -> Options:
        if self._peek_punct("("):
            return self._option_list()
        words: list[tuple[str, str | None]] = []
        while self.at < len(self.tokens) and self.tokens[self.at].kind == "word":
            words.append((self._next().upper(), None))
        return tuple(words)

    def _start(self) -> StartReplication | None:
        slot = self._name("a slot name") if self._word_if("SLOT") else None
        if not self._word_if("LOGICAL"):
            return None
        token = self._next()
        if token.kind != "lsn":
            self._fail(f"START_REPLICATION needs a position written X/Y, not {token.text!r}")
        try:
            position = positions.parse(token.text)
        except BadRequest as error:
            self._fail(error.message)
        options = self._option_list() if self._peek_punct("(") else ()
        return StartReplication(slot, position, options)

    def _option_list(self) -> Options:
        self._next()  # (
        options: list[tuple[str, str | None]] = []
        while True:
            name = self._name("an option name")
            value: str | None = None
            if self.at < len(self.tokens) and self.tokens[self.at].kind != "punct":
                value = self._next().text
            options.append((name, value))
            if self._peek_punct(","):
                self._next()
                continue
            if not self._peek_punct(")"):
                self._fail("an option list ends with ')'")
            self._next()
            return tuple(options)

    # -- tokens --------------------------------------------------------------------------

    def _next(self) -> _Token:
        if self.at >= len(self.tokens):
            self._fail("the command ends too early")
        token = self.tokens[self.at]
        self.at += 1
        return token

    def _name(self, what: str) -> str:
        token = self._next()
        if token.kind == "quoted":
            return token.text
        if token.kind in ("word", "string"):
            return token.text.lower() if token.kind == "word" else token.text
        self._fail(f"expected {what}, found {token.text!r}")

    def _word_if(self, word: str, *, punct: bool = False) -> bool:
        if self.at < len(self.tokens):
            token = self.tokens[self.at]
            if (token.kind == "punct" and token.text == word) if punct else token.upper() == word:
                self.at += 1
                return True
        return False

    def _peek_punct(self, text: str) -> bool:
        return (
            self.at < len(self.tokens)
            and self.tokens[self.at].kind == "punct"
            and self.tokens[self.at].text == text
        )

    def _fail(self, why: str) -> NoReturn:
        raise ReplicationSyntaxError(f"syntax error in a replication command: {why}")


def _tokens(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    at = 0
    end = len(text.rstrip())
    while at < end:
        match = _TOKEN.match(text, at)
        if match is None or match.end() == at:
            raise ReplicationSyntaxError(
                f"syntax error in a replication command at character {at + 1}:"
                f" {text[at : at + 20].strip()!r}"
            )
        kind = match.lastgroup or "punct"
        raw = match.group(kind)
        if kind == "quoted":
            raw = raw[1:-1].replace('""', '"')
        elif kind == "string":
            raw = raw[1:-1].replace("''", "'")
        tokens.append(_Token(kind, raw))
        at = match.end()
    return tokens

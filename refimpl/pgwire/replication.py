"""A `replication=database` connection's replication commands (spec: replication).

The connection logs in as any other and runs SQL as any other; a query whose text is a
replication command (`replication_commands`) is answered here instead:

- IDENTIFY_SYSTEM: systemid, timeline 1, the durable position (`X/Y`), the database;
- CREATE_REPLICATION_SLOT: a slot at the durable position (no snapshot is exported:
  `snapshot_name` is NULL; a reader that wants the rows as of then reads them itself);
- DROP_REPLICATION_SLOT [WAIT]; READ_REPLICATION_SLOT (as PostgreSQL: NULLs for an unknown
  slot, an error for a logical one);
- START_REPLICATION SLOT s LOGICAL X/Y (options): checked here (the slot, its database,
  the plugin's options, the log still holding what follows the slot's position), then
  streamed by a `Walsender` the server runs on a thread of its own.

Physical replication (BASE_BACKUP, START_REPLICATION PHYSICAL, physical slots,
TIMELINE_HISTORY) is refused with 0A000.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from refimpl.engine import replication_positions as positions
from refimpl.engine.instance import Instance
from refimpl.engine.rights import ADMIN_USER, Principal, Right
from refimpl.engine.statements.replication_slots import SlotStore
from refimpl.errors import BadRequest, KdbError, SlotError, TooManyConnections
from refimpl.pgwire import messages as m
from refimpl.pgwire import sqlstate, types
from refimpl.pgwire.replication_commands import (
    CreateSlot,
    DropSlot,
    IdentifySystem,
    ReadSlot,
    StartReplication,
    Unsupported,
    parse,
)
from refimpl.pgwire.replication_plugins import PLUGINS, make_plugin
from refimpl.pgwire.replication_stream import LOST_DETAIL, Walsender

RIGHTS_CACHE_S = 1.0  # how long a stream trusts what it learnt of its reader's rights
DEFAULT_MAX_SLOTS = 10


def _text_field(name: str) -> m.FieldDescription:
    return m.FieldDescription(name, types.TEXT, -1)


def _text(value: object) -> bytes:
    return str(value).encode("utf-8")


class ReplicationSession:
    """The replication side of one connection; one thread at a time uses it."""

    def __init__(
        self,
        instance: Instance,
        database: str,
        principal: Principal,
        pid: int,
        max_slots: int = DEFAULT_MAX_SLOTS,
    ) -> None:
        self.instance = instance
        self.database = database
        self.principal = principal
        self.pid = pid
        self.max_slots = max_slots
        self.slots: SlotStore = instance.slots
        self.walsender: Walsender | None = None  # set by START_REPLICATION, taken by the server
        self._sender: _Senders | None = None  # the place `open` took

    @classmethod
    def open(
        cls,
        instance: Instance,
        database: str,
        principal: Principal,
        pid: int,
        max_slots: int,
        max_senders: int,
    ) -> ReplicationSession:
        """A replication connection's session: one of `max_senders` places, or 53300."""
        senders = _senders_at(instance.path)
        with senders.lock:
            if senders.count >= max_senders:
                raise TooManyConnections(
                    "number of requested standby connections exceeds max_wal_senders"
                    f" (currently {max_senders}); raise pg_max_wal_senders or close one"
                )
            senders.count += 1
        session = cls(instance, database, principal, pid, max_slots)
        session._sender = senders
        return session

    def answer(self, text: str) -> list[m.ServerMessage] | None:
        """The answer of a replication command (ReadyForQuery included), or None for SQL."""
        try:
            command = parse(text)
            if command is None:
                return _search_path(text) or _show(text, self._settings())
            if isinstance(command, IdentifySystem):
                out = self._identify()
            elif isinstance(command, CreateSlot):
                out = self._create(command)
            elif isinstance(command, DropSlot):
                self.slots.drop(command.name, wait=command.wait, pid=self.pid)
                out = [m.CommandComplete("DROP_REPLICATION_SLOT")]
            elif isinstance(command, ReadSlot):
                out = self._read_slot(command.name)
            elif isinstance(command, StartReplication):
                self._start(command)
                return []  # the walsender answers from now on
            else:
                out = [_refuse_physical(command)]
        except SlotError as error:
            out = [m.ErrorResponse(error.sqlstate, error.message)]
        except KdbError as error:
            out = [sqlstate.error_response(error)]
        return [*out, m.ReadyForQuery("I")]

    def _settings(self) -> dict[str, str]:
        return {
            "data_directory_mode": "0700",
            "wal_level": "logical",
            "wal_segment_size": "16MB",
            "max_replication_slots": str(self.max_slots),
        }

    def end(self) -> None:
        """The connection ended: its temporary slots go, the slot it streamed is let go."""
        self.slots.release_all(self.pid)
        sender, self._sender = self._sender, None
        if sender is not None:
            with sender.lock:
                sender.count -= 1

    # -- commands ------------------------------------------------------------------------

    def _identify(self) -> list[m.ServerMessage]:
        durable = self.instance.database(self.database).log.durable_lsn
        system = int.from_bytes(hashlib.sha256(str(self.instance.path).encode()).digest()[:8]) >> 1
        fields = (
            _text_field("systemid"),
            m.FieldDescription("timeline", types.INT4, 4),
            _text_field("xlogpos"),
            _text_field("dbname"),
        )
        row = (str(system), 1, positions.text(positions.end_of(durable)), self.database)
        return [
            m.RowDescription(fields),
            m.DataRows([row], (_text, _text, _text, _text)),
            m.CommandComplete("IDENTIFY_SYSTEM"),
        ]

    def _create(self, command: CreateSlot) -> list[m.ServerMessage]:
        if not command.logical:
            return [_refuse_physical(Unsupported("CREATE_REPLICATION_SLOT PHYSICAL"))]
        plugin = command.plugin or ""
        if plugin not in PLUGINS:
            return [
                m.ErrorResponse(
                    "58P01",
                    f'could not access file "{plugin}": No such file or'
                    " directory; the output plugins are pgoutput and test_decoding",
                )
            ]
        for name, value in command.options:
            if name.lower() == "snapshot" and (value or "").lower() not in (
                "nothing",
                "export",
                "use",
            ):
                raise BadRequest(
                    f'unrecognized value for CREATE_REPLICATION_SLOT option "snapshot": "{value}"'
                )
            if name.lower() == "two_phase" and (value or "true").lower() in ("true", "on", "1"):
                raise BadRequest(
                    "two_phase slots are not supported: KDB has no prepared transactions"
                )
        durable = self.instance.database(self.database).log.durable_lsn
        at = positions.end_of(durable)
        self.slots.create(
            command.name,
            self.database,
            plugin,
            self.principal.name or "",
            at,
            temporary=command.temporary,
            pid=self.pid,
            limit=self.max_slots,
        )
        fields = tuple(
            _text_field(n)
            for n in ("slot_name", "consistent_point", "snapshot_name", "output_plugin")
        )
        row = (command.name, positions.text(at), None, plugin)
        return [
            m.RowDescription(fields),
            m.DataRows([row], (_text, _text, _text, _text)),
            m.CommandComplete("CREATE_REPLICATION_SLOT"),
        ]

    def _read_slot(self, name: str) -> list[m.ServerMessage]:
        fields = (
            _text_field("slot_type"),
            _text_field("restart_lsn"),
            m.FieldDescription("restart_tli", types.INT8, 8),
        )
        try:
            self.slots.get(name)
        except SlotError:
            return [
                m.RowDescription(fields),
                m.DataRows([(None, None, None)], (_text,) * 3),
                m.CommandComplete("READ_REPLICATION_SLOT"),
            ]
        return [
            m.ErrorResponse(
                "0A000", "cannot use READ_REPLICATION_SLOT with a logical replication slot"
            )
        ]

    def _start(self, command: StartReplication) -> None:
        if command.slot is None:
            raise SlotError(
                "42601",
                "logical replication needs a slot: START_REPLICATION SLOT name LOGICAL X/Y",
            )
        slot = self.slots.get(command.slot)
        if slot.database.lower() != self.database.lower():
            raise SlotError(
                "55000",
                f'replication slot "{slot.name}" was not created in this database'
                f" (it belongs to database {slot.database})",
            )
        database = self.instance.database(self.database)
        start = max(command.position, slot.confirmed)
        done = positions.resume(start).done_lsn
        if slot.lost or (database.log.oldest_lsn > done + 1 and database.log.durable_lsn > done):
            self.slots.mark_lost(slot.name)
            raise SlotError(
                "55000",
                f'can no longer get changes from replication slot "{slot.name}";'
                f" {LOST_DETAIL} Drop it and create a new slot",
            )
        plugin = make_plugin(slot.plugin, command.options)
        shows = self._shows(plugin.publications)
        self.slots.acquire(slot.name, self.pid)
        self.walsender = Walsender(database, self.slots, slot.name, plugin, shows, start, self.pid)

    def _shows(self, names: list[str] | None) -> Callable[[str], bool]:
        """Whether the stream shows a table: its reader may read it and, with `names`, one of
        those publications includes it and its owner may read it. Each table is asked
        again after RIGHTS_CACHE_S, so a REVOKE or an ALTER PUBLICATION reaches a running
        stream. An unknown publication is 42704 here, before the stream starts."""
        access, database = self.instance.access, self.database
        store = self.instance.publications
        if names is not None:
            for name in names:
                store.get(database, name)
        known: dict[str, bool] = {}
        since = [time.monotonic()]

        def may_read(user: Principal, table: str) -> bool:
            return access.allowed(user, database, Right.READ, table)

        def decide(table: str) -> bool:
            if not may_read(self.principal, table):
                return False
            if names is None:
                return True
            for publication in store.of(database):
                if publication.name in names and publication.includes(table):
                    owner = Principal(publication.owner, publication.owner == ADMIN_USER)
                    if may_read(owner, table):
                        return True
            return False

        def shows(table: str) -> bool:
            now = time.monotonic()
            if now - since[0] > RIGHTS_CACHE_S:
                known.clear()
                since[0] = now
            found = known.get(table)
            if found is None:
                found = known[table] = decide(table)
            return found

        return shows


_SET_SEARCH_PATH = re.compile(
    r"\s*SELECT\s+(?:pg_catalog\.)?set_config\s*\(\s*'search_path'\s*,\s*'([^']*)'\s*,"
    r"\s*false\s*\)\s*;?\s*",
    re.IGNORECASE,
)


_SHOW = re.compile(r"\s*SHOW\s+([a-z_]+)\s*;?\s*", re.IGNORECASE)


def _show(text: str, values: dict[str, str]) -> list[m.ServerMessage] | None:
    """SHOW of a setting replication clients read on this connection (pg_recvlogical reads
    `data_directory_mode`); None for any other SHOW, which goes to SQL."""
    match = _SHOW.fullmatch(text)
    name = match[1].lower() if match else ""
    if name not in values:
        return None
    return [
        m.RowDescription((_text_field(name),)),
        m.DataRows([(values[name],)], (_text,)),
        m.CommandComplete("SHOW"),
        m.ReadyForQuery("I"),
    ]


def _search_path(text: str) -> list[m.ServerMessage] | None:
    """pg_recvlogical's and pg_basebackup's first query, `SELECT pg_catalog.set_config(
    'search_path', '', false)`: answered as PostgreSQL does (the value set); every table is
    in one schema here, so the path changes nothing. None for any other SQL."""
    match = _SET_SEARCH_PATH.fullmatch(text)
    if match is None:
        return None
    return [
        m.RowDescription((_text_field("set_config"),)),
        m.DataRows([(match[1],)], (_text,)),
        m.CommandComplete("SELECT 1"),
        m.ReadyForQuery("I"),
    ]


@dataclass(slots=True)
class _Senders:
    """The replication connections of one data folder now (pg_max_wal_senders)."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0


_SENDERS: dict[Path, _Senders] = {}
_SENDERS_LOCK = threading.Lock()


def _senders_at(folder: Path) -> _Senders:
    with _SENDERS_LOCK:
        return _SENDERS.setdefault(folder.resolve(), _Senders())


def _refuse_physical(command: Unsupported) -> m.ErrorResponse:
    return m.ErrorResponse(
        "0A000",
        f"{command.command} is not supported: this server serves logical replication only"
        " (replication=database, START_REPLICATION SLOT name LOGICAL X/Y)",
    )


def may_replicate(instance: Instance, principal: Principal) -> bool:
    """Whether `principal` may open a replication connection (the REPLICATION right)."""
    return instance.access.may_replicate(principal)

"""The catalog relations of logical replication: `pg_replication_slots`, `pg_publication`,
`pg_publication_tables` and `pg_publication_rel`, from the slots and publications of the
data folder (spec: replication). `pg_catalog.RELATIONS` takes them (`relations`, given
pg_catalog's OIDs of names and users, so that this module imports nothing of it).

A reader sees the slots and publications of the database it is connected to (the admin,
every database's slots); a slot whose confirmed position the kept log no longer reaches is
`lost` in `wal_status`, else `reserved`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from refimpl.engine import replication_positions as positions
from refimpl.engine.query.select import QueryOutput
from refimpl.engine.result import Column
from refimpl.engine.statements.replication_slots import Slot

if TYPE_CHECKING:
    from refimpl.engine.statements.context import StatementContext

Oid = Callable[[str], int]
Relation = Callable[["StatementContext", object], QueryOutput]

SLOT_COLUMNS = (
    "slot_name:STRING plugin:STRING slot_type:STRING datoid:OID database:STRING"
    " temporary:BOOLEAN active:BOOLEAN active_pid:INT restart_lsn:STRING"
    " confirmed_flush_lsn:STRING wal_status:STRING two_phase:BOOLEAN"
)


def _columns(spec: str) -> list[Column]:
    return [Column(name, kind) for name, _, kind in (p.partition(":") for p in spec.split())]


def _output(spec: str, rows: list[tuple[object, ...]]) -> QueryOutput:
    return QueryOutput(_columns(spec), rows)


def wal_status(context: StatementContext, slot: Slot) -> str:
    """`lost` once the kept log no longer holds what follows the slot's position."""
    if slot.lost:
        return "lost"
    if slot.database.lower() != context.database.name.lower():
        return "reserved"
    log = context.database.log
    done = positions.resume(slot.confirmed).done_lsn
    return "lost" if log.oldest_lsn > done + 1 and log.durable_lsn > done else "reserved"


def relations(name_oid: Oid, role_oid: Oid) -> dict[str, Relation]:
    """The relations, with `name_oid` and `role_oid` as pg_catalog gives OIDs."""

    def _slots(context: StatementContext, views: object) -> QueryOutput:
        database = context.database
        store = context.catalog.slots
        rows: list[tuple[object, ...]] = []
        for slot in store.all():
            if slot.database.lower() != database.name.lower() and not context.principal.is_admin:
                continue
            confirmed = positions.text(slot.confirmed)
            rows.append(
                (
                    slot.name,
                    slot.plugin,
                    "logical",
                    name_oid(slot.database),
                    slot.database,
                    slot.temporary,
                    slot.active_pid is not None,
                    slot.active_pid,
                    confirmed,
                    confirmed,
                    wal_status(context, slot),
                    False,
                )
            )
        return _output(SLOT_COLUMNS, rows)

    def _publication(context: StatementContext, views: object) -> QueryOutput:
        database = context.database
        rows: list[tuple[object, ...]] = [
            (
                name_oid(f"publication {p.name}"),
                p.name,
                role_oid(p.owner),
                p.all_tables,
                True,
                True,
                True,
                True,
                False,
            )
            for p in context.catalog.publications.of(database.name)
        ]
        return _output(
            "oid:OID pubname:STRING pubowner:OID puballtables:BOOLEAN pubinsert:BOOLEAN"
            " pubupdate:BOOLEAN pubdelete:BOOLEAN pubtruncate:BOOLEAN pubviaroot:BOOLEAN",
            rows,
        )

    def _tables_of(context: StatementContext) -> list[tuple[str, str]]:
        """(publication, table) for each table a publication of the database includes now."""
        database = context.database
        names = sorted(t.schema.name for t in database.tables.values())
        return [
            (p.name, table)
            for p in context.catalog.publications.of(database.name)
            for table in names
            if p.includes(table) and context.can_read(table)
        ]

    def _publication_tables(context: StatementContext, views: object) -> QueryOutput:
        rows: list[tuple[object, ...]] = [
            (pub, "public", table) for pub, table in _tables_of(context)
        ]
        return _output("pubname:STRING schemaname:STRING tablename:STRING", rows)

    def _publication_rel(context: StatementContext, views: object) -> QueryOutput:
        rows: list[tuple[object, ...]] = [
            (
                name_oid(f"{pub}.{table}"),
                name_oid(f"publication {pub}"),
                name_oid(table),
                None,
                None,
            )
            for pub, table in _tables_of(context)
            if not _all_tables(context, pub)
        ]
        return _output("oid:OID prpubid:OID prrelid:OID prqual:STRING prattrs:STRING", rows)

    def _all_tables(context: StatementContext, name: str) -> bool:
        database = context.database
        store = context.catalog.publications
        return store.get(database.name, name).all_tables

    return {
        "pg_replication_slots": _slots,
        "pg_publication": _publication,
        "pg_publication_tables": _publication_tables,
        "pg_publication_rel": _publication_rel,
    }

"""How far each replication slot is behind its database's durable log, for /metrics."""

from __future__ import annotations

from dataclasses import dataclass

from refimpl.engine import replication_positions as positions
from refimpl.engine.instance import Instance
from refimpl.engine.statements.replication_slots import slots_at
from refimpl.errors import UnknownDatabase


@dataclass(frozen=True, slots=True)
class SlotLag:
    slot: str
    database: str
    lag_lsns: int  # durable transactions the slot's client has not confirmed whole
    active: bool  # a client streams from it now


def slot_lags(instance: Instance) -> list[SlotLag]:
    """Every slot of the data folder; a slot of a dropped database is left out."""
    lags: list[SlotLag] = []
    for slot in slots_at(instance.path, instance.files).all():
        try:
            durable = instance.database(slot.database).log.durable_lsn
        except UnknownDatabase:
            continue
        done = positions.resume(slot.confirmed).done_lsn
        lags.append(
            SlotLag(slot.name, slot.database, max(0, durable - done), slot.active_pid is not None)
        )
    return lags

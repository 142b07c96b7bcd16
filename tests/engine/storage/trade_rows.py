"""A trades table of the shape bulk loads are tested on, and rows for it as a load takes
them (tests/engine/storage/test_bulk_load.py and test_commit_order.py)."""

from __future__ import annotations

from refimpl.engine.storage import values

TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE, qty BIGINT)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(symbol)"
)
TYPES = ("TIMESTAMP", "SYMBOL", "DOUBLE", "BIGINT")
DAY = 86_400_000_000
BASE = 1_767_571_200_000_000  # 2026-01-05


def trades(count: int, start: int = 0, step: int = 7_000_000) -> values.TypedRows:
    """`count` rows from the `start`th, `step` microseconds apart, over 7 symbols."""
    return values.TypedRows(
        TYPES,
        ((BASE + (start + i) * step, f"S{i % 7}", i * 0.5, i) for i in range(count)),
    )

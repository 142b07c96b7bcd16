"""What a query's WHERE clause tells a table scan it may skip (planned by the query layer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class AccessHints:
    """What the WHERE clause lets a source skip: a point identity, periods, a symbol."""

    ident: tuple[Any, ...] | None = None
    low_period: str | None = None
    high_period: str | None = None
    symbol: tuple[bool, str] | None = None
    time_low: int | None = None  # inclusive bounds on the TIMESERIES column, in micros
    time_high: int | None = None

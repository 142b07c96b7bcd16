"""The `sample` database: minute candles of a few symbols, the same on every machine.

`refimpl serve --sample` creates it when missing, so documentation examples that read
`ochl_minutes` run as written.
"""

from __future__ import annotations

import random

from refimpl.engine.instance import Instance
from refimpl.engine.storage.values import parse_timestamp

SAMPLE_DATABASE = "sample"
SYMBOLS = ("CITY", "HIDCL", "NABIL", "NEPSE", "NTC")
START = "2026-09-24T05:15:00Z"  # 11:00 in Kathmandu, the market's opening
MINUTES = 240
CREATE = (
    "CREATE TABLE ochl_minutes (time TIMESTAMP, symbol SYMBOL, open DOUBLE, high DOUBLE,"
    " low DOUBLE, close DOUBLE, volume BIGINT) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(symbol) SORT BY (symbol, time) DEDUP KEY (symbol, time)"
)


def candles(seed: int = 20260924) -> list[tuple]:
    """Deterministic candles: a random walk per symbol, one row a minute."""
    generator = random.Random(seed)
    start = parse_timestamp(START)
    rows = []
    for symbol in SYMBOLS:
        price = generator.uniform(200, 3000)
        for minute in range(MINUTES):
            open_ = price
            moves = [price * (1 + generator.gauss(0, 0.002)) for _ in range(4)]
            close = moves[-1]
            high = max(open_, close, *moves)
            low = min(open_, close, *moves)
            volume = generator.randint(10, 5000)
            rows.append(
                (
                    start + minute * 60_000_000,
                    symbol,
                    round(open_, 2),
                    round(high, 2),
                    round(low, 2),
                    round(close, 2),
                    volume,
                )
            )
            price = close
    return rows


def ensure_sample(instance: Instance) -> bool:
    """Create the sample database with its data; False when it already exists."""
    if not instance.create_database(SAMPLE_DATABASE, if_not_exists=True):
        return False
    session = instance.session(SAMPLE_DATABASE)
    try:
        session.execute(CREATE)
        columns = ["time", "symbol", "open", "high", "low", "close", "volume"]
        session.insert_rows("ochl_minutes", columns, candles())
    finally:
        session.close()
    return True

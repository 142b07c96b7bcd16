"""The live query the feature tests subscribe to most: a candle (open, high, low, close of one
symbol a minute) over a table of trades partitioned by day and symbol."""

from __future__ import annotations

TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE) TIMESERIES(time)"
    " PARTITION BY DAY, SYMBOL(symbol)"
)
CANDLES_OF = (  # .format(symbol=...)
    "SUBSCRIBE SELECT date_trunc('minute', time) AS m, first(price) AS open,"
    " max(price) AS high, min(price) AS low, last(price) AS close FROM trades"
    " WHERE symbol = '{symbol}' GROUP BY m ORDER BY m"
)
CANDLES = CANDLES_OF.format(symbol="NABIL")

"""The live-query benches' table and subscription: trades of many symbols, and the minute
candles (open, high, low, close) of one symbol (`CANDLES.format(symbol=...)`), issue 37's
candle subscription. `subscribe_phase.py` and `subscribe_split.py` (`subscribe.py`'s parts)
import it by its bare name, `subscribe_parts.py` by its path (`bench_path.sibling`)."""

TRADES = (
    "CREATE TABLE trades (time TIMESTAMP, symbol SYMBOL, price DOUBLE)"
    " TIMESERIES(time) PARTITION BY DAY, SYMBOL(symbol)"
)
CANDLES = (
    "SUBSCRIBE SELECT date_trunc('minute', time) AS m, first(price) AS open,"
    " max(price) AS high, min(price) AS low, last(price) AS close FROM trades"
    " WHERE symbol = '{symbol}' GROUP BY m ORDER BY m"
)

"""GET /api/subscribe?stream=true on a real server, streams of one query woken together (their
parts share one encoded event, sent with each stream's own `id:` line): whatever the mix of
identical and different subscriptions, users, commits and revokes, every stream reads
exactly the events it would alone: its own subscription's ids, one version after another,
one `rows` event per commit that changed its answer, the rows of its own query, and its end
once its user's right is revoked or its token dropped, the other streams going on (one pass
makes a user's streams' parts, looking at each token once for all its streams: never at
another's)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.http.conftest import ADMIN, Server, running_server
from tests.http.stream_client import EventReader
from tests.hypothesis_settings import OVER_FIXTURE

SYMBOLS = ("a", "b")
USERS = 3  # the admin's streams, and two users' who may lose their right


def _query(symbol: str) -> str:
    return (
        "SUBSCRIBE SELECT s, count(*) AS n, sum(v) AS total FROM t"
        f" WHERE s = '{symbol}' GROUP BY s ORDER BY s"
    )


def _open(server: Server, db: str, token: object, symbol: str) -> EventReader:
    params = {"query": _query(symbol), "db": db, "stream": "true"}
    response = server.get(
        "/api/subscribe", params=params, stream=True, timeout=(10, 10), token=token
    )
    return EventReader(response)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data = tmp_path_factory.mktemp("shared_live_streams") / "data"
    data.mkdir()
    # 96 threads: 24 wait places. A user holding k places takes another only while more
    # than k are free (the fair share), so the 10 streams an example opens, however they
    # fall among the users, all get one; with 16, one user's ninth stream is refused and
    # ends after its snapshot, as the spec says.
    (data / "kdb.conf").write_text("threads = 96\nstream_heartbeat_s = 0.3\n")
    with running_server(data) as running:
        yield running


@dataclass
class _Opened:
    """One stream of the example and what it must read next."""

    user: int
    symbol: str
    key: int  # which of its user's two tokens it was opened with
    reader: EventReader
    name: str = ""  # its subscription, from its snapshot's id
    version: int = 1
    ended: bool = False
    events: list[dict] = field(default_factory=list)


OPS = st.one_of(
    st.tuples(st.just("commit"), st.sampled_from(SYMBOLS), st.integers(1, 99)),
    st.tuples(st.sampled_from(("revoke", "drop")), st.integers(1, USERS - 1), st.integers(1, 99)),
)


@settings(OVER_FIXTURE, max_examples=6)
@given(
    opened=st.lists(
        st.tuples(st.integers(0, USERS - 1), st.sampled_from(SYMBOLS), st.integers(0, 1)),
        min_size=2,
        max_size=10,
    ),
    ops=st.lists(OPS, min_size=1, max_size=6),
)
def test_each_stream_reads_what_it_would_alone(server: Server, opened, ops) -> None:
    db = "ls_" + uuid.uuid4().hex[:10]
    server.sql(f"CREATE DATABASE {db}")
    server.sql(
        "CREATE TABLE t (ts TIMESTAMP, s SYMBOL, v DOUBLE) TIMESERIES(ts) PARTITION BY DAY,"
        " SYMBOL(s)",
        db,
    )
    server.sql("INSERT INTO t VALUES (now(), 'a', 1), (now(), 'b', 100)", db)
    model = {"a": [1.0], "b": [100.0]}
    tokens: list[list[object]] = [[ADMIN, ADMIN] for _ in range(USERS)]
    names = [""] * USERS
    for user in range(1, USERS):
        names[user] = "u_" + uuid.uuid4().hex[:8]
        server.sql(f"CREATE USER {names[user]}", db)
        server.sql(f"GRANT SELECT ON t TO {names[user]}", db)
        # Two tokens: one pass makes the parts of all a user's streams, whichever token.
        tokens[user] = [server.new_token(names[user], db) for _ in range(2)]
    streams = [
        _Opened(user, symbol, key, _open(server, db, tokens[user][key], symbol))
        for user, symbol, key in opened
    ]
    try:
        for stream in streams:
            (first,) = stream.reader.take(1)
            assert first["event"] == "snapshot"
            stream.name, _, version = first["id"].rpartition(".")
            assert version == "1"
            assert first["data"]["rows"] == [[stream.symbol, 1, model[stream.symbol][0]]]
        assert len({s.name for s in streams}) == len(streams)  # a subscription each

        def commit_each(value: int) -> None:
            # A commit to each symbol: each live stream's next event (an event twice, or one
            # of the other symbol, would come first).
            for symbol in SYMBOLS:
                server.sql(f"INSERT INTO t VALUES (now(), '{symbol}', {value})", db)
                model[symbol].append(float(value))
            for stream in streams:
                if stream.ended:
                    continue
                (event,) = stream.reader.take(1)
                stream.version += 1
                assert event["id"] == f"{stream.name}.{stream.version}"
                symbol = stream.symbol
                rows = [[symbol, len(model[symbol]), sum(model[symbol])]]
                assert event["data"]["rows"] == rows

        done: set[tuple[str, int]] = set()
        for op, arg, value in ops:
            if op in ("revoke", "drop"):
                if (op, arg) in done:
                    continue
                done.add((op, arg))
                if op == "revoke":
                    server.sql(f"REVOKE SELECT ON t FROM {names[arg]}", db)
                else:  # its first token: the streams of its second go on
                    server.sql(f"DROP TOKEN '{tokens[arg][0]}'", db)
                ending = [
                    s
                    for s in streams
                    if s.user == arg and not s.ended and (op == "revoke" or s.key == 0)
                ]
                for stream in ending:
                    stream.ended = True
                # Woken with the others at once: each stream of that user ends with no event
                # after the drop or revoke, every other's takes its part.
                commit_each(value)
                for stream in ending:
                    assert stream.reader.until_end(10) == []
                    comments = stream.reader.comments
                    assert any(c.startswith("the stream ended: ") for c in comments)
                continue
            symbol = str(arg)
            server.sql(f"INSERT INTO t VALUES (now(), '{symbol}', {value})", db)
            model[symbol].append(float(value))
            data_seen = set()
            for stream in streams:
                if stream.ended or stream.symbol != symbol:
                    continue
                (event,) = stream.reader.take(1)
                stream.version += 1
                assert event["id"] == f"{stream.name}.{stream.version}"
                assert event["event"] == "rows"
                rows = [[symbol, len(model[symbol]), sum(model[symbol])]]
                assert event["data"]["rows"] == rows
                data_seen.add(json.dumps(event["data"], sort_keys=True))
            assert len(data_seen) <= 1  # the same change for every stream of the query
        commit_each(0)  # nothing more for anyone
    finally:
        for stream in streams:
            stream.reader.close()

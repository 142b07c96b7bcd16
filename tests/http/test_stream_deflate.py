"""The event stream compressed (`Content-Encoding: deflate`, spec/stream.md) on a real server
set to (`stream_compression = deflate`; by default streams are sent as they are): read over
raw sockets, each chunk inflated as it comes, against plain streams of the same
commits; the zlib stream ends whole (its checksum checked) when the server shuts down.
"""

from __future__ import annotations

import random
import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from refimpl.http.endpoints.stream_deflate import (
    Checksum,
    accepts_deflate,
    add_to_each,
    combine,
    piece,
)
from tests.http.conftest import Server, deflating_server, running_server
from tests.http.stream_client import RawStream

HEARTBEAT = 0.3


@pytest.mark.parametrize(
    ("header", "accepted"),
    [
        ("gzip, deflate", True),
        ("gzip, deflate, br, zstd", True),
        ("DEFLATE ; q=0.5", True),
        ("*", True),
        ("gzip", False),
        ("", False),
        (None, False),
        ("deflate;q=0", False),
        ("*, deflate;q=0", False),
        ("deflate;q=0, *", False),
        ("*;q=0", False),
        ("deflate;q=nonsense", False),
        ("identity", False),
    ],
)
def test_which_accept_encoding_headers_take_deflate(header: str | None, accepted: bool) -> None:
    assert accepts_deflate(header) is accepted


def test_pieces_and_their_checksums_make_one_zlib_stream() -> None:
    rng = random.Random(7)
    parts = [rng.randbytes(rng.randrange(0, 3000)) + b"event: x\n\n" * rng.randrange(50)]
    parts += [b": heartbeat\n\n", b"", bytes(70000)]
    checksum = Checksum()
    body = b"\x78\x01"
    for part in parts:
        made = piece(part)
        checksum.add(made)
        body += made.body
        assert combine(zlib.adler32(part), 1, 0) == zlib.adler32(part)
    body += checksum.last(b": the end\n\n")
    # A shared part's round adds to each member's checksum as `add` does.
    members = [Checksum() for _ in range(3)]
    for part in parts:
        add_to_each(members, piece(part))
    assert {member.value for member in members} == {checksum.value}
    inflate = zlib.decompressobj()
    assert inflate.decompress(body) == b"".join(parts) + b": the end\n\n"
    assert inflate.eof and not inflate.unused_data


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    with deflating_server(tmp_path, HEARTBEAT) as running:
        yield running


def test_by_default_a_stream_is_sent_as_it_is_whatever_its_client_accepts(
    tmp_path: pytest.TempPathFactory,
) -> None:
    data = tmp_path / "data"  # type: ignore[operator]
    data.mkdir()
    with running_server(data) as server:
        server.sql("CREATE TABLE t (id INT PRIMARY KEY, name STRING)")
        streams = [RawStream(server, accept) for accept in ("gzip, deflate", "*", "deflate")]
        for stream in streams:
            assert not stream.deflated, stream.head
            # Its encoding depends on nothing the client says: no Vary.
            assert not re.search(r"(?im)^vary:", stream.head), stream.head
            stream.read_until(b"event: ready")
        server.sql("INSERT INTO t VALUES (1, 'a')")
        for stream in streams:
            stream.read_until(b'"id":1')
        assert server.stop() == 0
        for stream in streams:
            for chunk in stream.chunks():
                stream.text += chunk
            assert b": the stream ended: the server is shutting down" in stream.text


def test_compressed_streams_get_the_plain_streams_events_and_end_whole(server: Server) -> None:
    compressed = [RawStream(server, "gzip, deflate") for _ in range(3)]
    plain = [RawStream(server, None), RawStream(server, "gzip"), RawStream(server, "deflate;q=0")]
    for stream in compressed:
        assert stream.deflated, stream.head
        assert re.search(r"(?im)^vary: accept-encoding\r?$", stream.head)
    for stream in plain:
        assert not stream.deflated, stream.head
    for stream in compressed + plain:
        stream.read_until(b"event: ready")
    # Commits one by one and many at once, with heartbeats between some of them: the
    # streams share their parts (one group), each compressed once for the compressed ones.
    for n in range(20):
        server.sql(f"INSERT INTO t VALUES ({n}, 'row {n} ' || '{'x' * n}')")
    time.sleep(HEARTBEAT * 2)
    values = ", ".join(f"({n}, 'many {n}')" for n in range(100, 400))
    server.sql(f"INSERT INTO t VALUES {values}")
    for stream in compressed + plain:
        stream.read_until(b'"id":399')
    expected = plain[0].events()
    assert len([e for e in expected if b"event: change" in e]) == 320
    for stream in compressed + plain[1:]:
        assert stream.events() == expected
    assert all(b": heartbeat" in stream.text for stream in compressed)
    # The shutdown's last part ends each zlib stream: its checksum over every part checked.
    assert server.stop() == 0
    for stream in compressed:
        for chunk in stream.chunks():
            stream.text += chunk
        assert b": the stream ended: the server is shutting down" in stream.text
        assert stream.inflate.eof and not stream.inflate.unused_data


def test_a_stream_with_options_is_sent_plain(server: Server) -> None:
    stream = RawStream(server, "deflate", "&table=t&types=true")
    assert not stream.deflated, stream.head
    stream.read_until(b"event: ready")
    server.sql("INSERT INTO t VALUES (1, 'a')")
    stream.read_until(b'"type":"change"')

"""A write into a block still encoded never loses to a reader decoding that block at the
same time: since point reads by key may read without the state lock (`point_read.
read_without_lock`), a reader can be decoding a block while the one writer writes it."""

from __future__ import annotations

import threading
from typing import Any

from refimpl.engine.storage.blocks import Blocks

SOON = 5.0  # seconds: what a thread that is not stuck takes at most


def opened(payload: Any) -> tuple[list[tuple[int]], dict[tuple[int], tuple[int, str]]]:
    keys = [(n,) for n in payload]
    return keys, {key: (key[0], "old") for key in keys}


def test_a_write_during_a_readers_decode_of_its_block_is_kept() -> None:
    decoding, finish = threading.Event(), threading.Event()

    def slow_opener(payload: Any) -> Any:
        # The reader's decode: it has taken the payload and is paused, as a thread
        # switch in the middle of a 0.3 ms decode would pause it.
        if threading.current_thread().name == "reader":
            decoding.set()
            finish.wait(SOON)
        return opened(payload)

    partition = Blocks.from_encoded([((3,), 3, 0, [1, 2, 3])], slow_opener)
    reader = threading.Thread(target=lambda: partition.get((2,)), name="reader", daemon=True)
    reader.start()
    assert decoding.wait(SOON)
    partition[(2,)] = (2, "new")  # the writer, while the reader is inside its decode
    finish.set()
    reader.join(SOON)
    assert partition.get((2,)) == (2, "new")
    assert list(partition.items()) == [((1,), (1, "old")), ((2,), (2, "new")), ((3,), (3, "old"))]

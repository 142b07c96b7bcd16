"""Freed memory goes back to the system (spec: operations, the server's memory): the arenas
are bounded at the start unless the operator bounds them, and memory freed since the last
look is given back by the trimmer. Only where the C library is glibc."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl import native_memory

pytestmark = pytest.mark.skipif(
    native_memory.held_free() is None, reason="the C library is not glibc"
)

MB = 1024 * 1024


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_the_arenas_are_bounded_unless_the_operator_bounds_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert native_memory.bound_arenas() is False
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert native_memory.bound_arenas() is True


def test_memory_freed_in_the_middle_of_the_heap_is_given_back() -> None:
    trimmer = native_memory.Trimmer(look_seconds=0.1, free_bytes=32 * MB)
    assert trimmer.start()
    try:
        # Blocks under the allocator's mmap threshold, from its heap; every other one freed:
        # the freed ones sit between kept ones, where freeing alone gives nothing back.
        blocks = [bytearray(64 * 1024) for _ in range(3200)]  # 200 MB
        before = _rss_mb()
        del blocks[::2]
        deadline = time.monotonic() + 10
        while trimmer.trims == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert trimmer.trims >= 1
        assert _rss_mb() < before - 50, (before, _rss_mb())
        assert len(blocks) == 1600  # the kept half stays
    finally:
        trimmer.close()


# A large block freed raises glibc's own threshold to its size; blocks below it then come
# from the heap and, every other one freed, stay there as free memory until a trim (whose
# walk stops every thread that allocates meanwhile). Run in a process of its own: the
# setting is the process's.
_LARGE_BLOCKS_FREED = """
import sys
from refimpl import native_memory
if sys.argv[1] == "fixed":
    assert native_memory.fix_mmap_threshold()
big = bytearray(8 * 1024 * 1024)
del big  # glibc would now carve blocks below 8 MB out of its heap
blocks = [bytearray(256 * 1024) for _ in range(400)]  # 100 MB
before = native_memory.held_free()
del blocks[::2]
print((native_memory.held_free() - before) // (1024 * 1024))
"""


def _freed_and_held_mb(mode: str) -> int:
    env = dict(os.environ)
    env.pop("MALLOC_MMAP_THRESHOLD_", None)  # the operator's would be kept
    env.pop("GLIBC_TUNABLES", None)
    done = subprocess.run(
        [sys.executable, "-c", _LARGE_BLOCKS_FREED, mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return int(done.stdout)


def test_large_blocks_freed_go_back_without_a_trim() -> None:
    assert _freed_and_held_mb("glibc") >= 40  # the default: 50 MB held, only a trim frees it
    assert _freed_and_held_mb("fixed") < 10  # mapped on their own: given back as freed


def test_the_mmap_threshold_is_left_to_the_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GLIBC_TUNABLES", raising=False)
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    assert native_memory.fix_mmap_threshold() is False
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.mmap_threshold=65536")
    assert native_memory.fix_mmap_threshold() is False

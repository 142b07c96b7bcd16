"""Freed memory goes back to the system (spec: operations, the server's memory): the arenas
are bounded at the start unless the operator bounds them, and memory freed since the last
look is given back by the trimmer. Only where the C library is glibc."""

from __future__ import annotations

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

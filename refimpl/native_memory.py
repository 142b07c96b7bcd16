"""Freed memory given back to the system: what the server asks of the C library's allocator.

Large buffers (a COPY's rows, a page of an initial copy, a pipelined client's answers) are
allocated by the C library, not by Python's own small-object allocator. glibc gives each
thread that allocates at once with another an arena of its own, up to eight per core, and
keeps what is freed in them for later: after a burst of large requests on many threads the
process holds hundreds of megabytes it no longer uses (measured: a client sending COPYs that
are refused past `memory_mb` grew the server from 92 to 771 MB, kept after it left).

So, with glibc only (anything else is left as it is; no call here fails or raises):

- `bound_arenas` (once, at the start, before the server's threads exist): at most
  `ARENAS` arenas. The interpreter lock lets one thread allocate at a time anyway, so more
  arenas buy no speed. An operator's own `MALLOC_ARENA_MAX` (or glibc tunable) is kept.
- `fix_mmap_threshold` (once, at the start): every block of `MMAP_BYTES` or more gets pages
  of its own from the system and gives them back as it is freed. glibc's own threshold
  starts there but rises to the size of each such block freed (up to 32 MB), so after one
  large page of an initial copy every later answer, page or COPY buffer below that size
  is carved out of the heap and, freed, stays there until a trim. A trim walks every free
  chunk of an arena holding the arena's lock, and a thread that allocates meanwhile waits
  with the interpreter lock held: every thread stops for as long as the trim takes
  (measured under the isolation benchmark: 888 ms once, on a loaded machine). Little is
  left for the trimmer to do, so its pauses are rare and short. An operator's own
  `MALLOC_MMAP_THRESHOLD_` (or glibc tunable) is kept.
- `Trimmer`: a thread that looks every `LOOK_SECONDS` at how much the allocator holds free,
  and when that grew by `FREE_BYTES` since its last look back asks it to give the free
  pages back (`malloc_trim(0)`), so memory a finished or refused request freed goes back to
  the system within seconds, whatever the request was.

Imports nothing of refimpl.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import threading

log = logging.getLogger("refimpl.memory")

ARENAS = 2
LOOK_SECONDS = 5.0
FREE_BYTES = 64 * 1024 * 1024  # freed and held by the allocator since the last trim
MMAP_BYTES = 128 * 1024  # glibc's own starting threshold, kept from rising
M_ARENA_MAX = -8  # mallopt's parameter numbers (glibc's malloc.h)
M_MMAP_THRESHOLD = -3


class _MallInfo2(ctypes.Structure):
    """glibc's `struct mallinfo2` (2.33 and later): sizes in bytes, as size_t."""

    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    """The process's own C library when it is glibc (it names its version), else None."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
    except (OSError, AttributeError, TypeError):  # TypeError: no CDLL(None) on Windows
        return None
    return libc


def bound_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` allocator arenas for threads started from now on; True when set
    (glibc, and no `MALLOC_ARENA_MAX` or `malloc.arena_max` tunable of the operator's)."""
    if "MALLOC_ARENA_MAX" in os.environ or "arena_max" in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    return _mallopt(M_ARENA_MAX, arenas)


def fix_mmap_threshold(size: int = MMAP_BYTES) -> bool:
    """Blocks of `size` bytes or more mapped on their own from now on, whatever was freed
    before; True when set (glibc, and no `MALLOC_MMAP_THRESHOLD_` or `malloc.mmap_threshold`
    tunable of the operator's)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in tunables:
        return False
    return _mallopt(M_MMAP_THRESHOLD, size)


def _mallopt(parameter: int, value: int) -> bool:
    libc = _glibc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(parameter, value))


def held_free() -> int | None:
    """Bytes the allocator holds free in its arenas (not given back), None without glibc's
    `mallinfo2`."""
    libc = _glibc()
    mallinfo2 = getattr(libc, "mallinfo2", None)
    if mallinfo2 is None:
        return None
    mallinfo2.argtypes = []
    mallinfo2.restype = _MallInfo2
    info = mallinfo2()
    return int(info.fordblks)


def trim() -> bool:
    """Give the allocator's free memory back to the system; True when some was. The call
    lets the interpreter lock go while it runs (ctypes does for every foreign call)."""
    libc = _glibc()
    malloc_trim = getattr(libc, "malloc_trim", None)
    if malloc_trim is None:
        return False
    malloc_trim.argtypes = [ctypes.c_size_t]
    malloc_trim.restype = ctypes.c_int
    return bool(malloc_trim(0))


class Trimmer:
    """A daemon thread giving freed memory back (see the module docstring); `start` does
    nothing where the allocator cannot say what it holds."""

    def __init__(self, look_seconds: float = LOOK_SECONDS, free_bytes: int = FREE_BYTES) -> None:
        self._look = look_seconds
        self._free_bytes = free_bytes
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.trims = 0  # times memory was given back

    def start(self) -> bool:
        """Start looking; False (and no thread) without glibc's `mallinfo2`."""
        if held_free() is None:
            return False
        self._thread = threading.Thread(target=self._run, name="kdb-memory-trim", daemon=True)
        self._thread.start()
        return True

    def close(self) -> None:
        """Stop looking (at once; a trim under way finishes first)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._look + 5)

    def _run(self) -> None:
        # A trim gives free pages back but the allocator still counts them free: what grew
        # past the least seen since the last trim is what was freed meanwhile. Free memory
        # that stays free (pieces too small to give back) is thus not trimmed again and
        # again.
        floor = held_free() or 0
        while not self._stop.wait(self._look):
            free = held_free() or 0
            floor = min(floor, free)
            if free - floor >= self._free_bytes:
                trim()
                self.trims += 1
                floor = held_free() or 0
                log.debug("gave back memory freed since the last look (%d MB)", free >> 20)

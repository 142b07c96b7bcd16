"""Connection counts and limits, and the process's open-file limit: what every server of
refimpl (HTTP, the PostgreSQL protocol) shares about connections, whatever it speaks.

A server admits a new connection with `ConnectionCounts.admit` (or learns why not, in a
sentence naming the setting) and releases it when it closes; how a refused client is told
is the protocol's business. Imports nothing of refimpl.
"""

from __future__ import annotations

import errno
import resource
import threading
from dataclasses import dataclass

OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """Open connections at most, in all and from one client address, and the names of the
    settings that set them (for the refusal's sentence).

    The last `reserved` places of `total` are kept for privileged connections (admins):
    others are refused when only those are left, so that an admin can always log in to
    look at what holds the rest. At most `total - 1` are reserved, whatever is asked."""

    total: int = 10_000
    per_address: int = 4096
    total_setting: str = "max_connections"
    per_address_setting: str = "max_connections_per_address"
    reserved: int = 0
    reserved_setting: str = ""


class ConnectionCounts:
    """The open connections, in all and by client address; thread-safe."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._total = 0
        self._by_address: dict[str, int] = {}

    def admit(self, address: str, privileged: bool = False) -> str | None:
        """Count a new connection from `address`; or the reason it is refused (not counted).

        A `privileged` connection may take the reserved places too."""
        limits = self.limits
        reserved = 0 if privileged else min(limits.reserved, limits.total - 1)
        with self._lock:
            if self._total >= limits.total:
                return (
                    f"the server has {limits.total} connections open, its limit"
                    f" ({limits.total_setting}); retry later"
                )
            if self._total >= limits.total - reserved:
                return (
                    f"the server has {self._total} connections open; the other {reserved}"
                    f" of its {limits.total} ({limits.total_setting}) are reserved for"
                    f" admins ({limits.reserved_setting}); retry later"
                )
            held = self._by_address.get(address, 0)
            if held >= limits.per_address:
                return (
                    f"{address} has {held} connections open, the limit for one address"
                    f" ({limits.per_address_setting}); close some or retry later"
                )
            self._total += 1
            self._by_address[address] = held + 1
            return None

    def total(self) -> int:
        """The connections open now."""
        return self._total

    def release(self, address: str) -> None:
        with self._lock:
            self._total -= 1
            left = self._by_address.get(address, 1) - 1
            if left:
                self._by_address[address] = left
            else:
                self._by_address.pop(address, None)


def raise_open_file_limit() -> None:
    """Let the process open as many files as its hard limit allows (one per connection)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    except (ValueError, OSError):
        pass  # not allowed here: the soft limit stays, and EMFILE is answered when reached

"""Where the benches run: this folder, the repository it is in, loopback and a free port on
it."""

from __future__ import annotations

import socket
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent
REPO = BENCH.parent.parent
LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]

"""`FileOps`: the one seam through which the engine changes files on disk.

The write-ahead log, checkpoints, the access file and the sessions journal open, write, sync,
rename, truncate and remove their files only through a `FileOps` object handed to them; the
real one calls `os`. A test hands in a subclass that fails the Nth operation (EIO, ENOSPC),
writes short, or remembers what each file held at its last fsync to stage a power loss, and so
reaches every failure path without mocking a component. Reading stays plain Python I/O: a
read cannot lose an acknowledged change.

A leaf module: it imports nothing of the engine, so storage and access both take it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["REAL_FILES", "FileOps", "write_all"]


class FileOps:
    """File operations as the engine needs them; every method is one system call or two."""

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        """Writes some of `data`; returns how many bytes (maybe fewer: see `write_all`)."""
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def replace(self, source: Path, target: Path) -> None:
        os.replace(source, target)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def truncate(self, path: Path, size: int) -> None:
        os.truncate(path, size)

    def mkdir(self, path: Path) -> bool:
        """Creates `path` and missing parents; True when it did not exist before."""
        if path.is_dir():
            return False
        path.mkdir(parents=True, exist_ok=True)
        return True

    def sync_directory(self, path: Path) -> None:
        """Makes the names in folder `path` (files created, renamed, removed) durable."""
        fd = self.open(path, os.O_RDONLY)
        try:
            self.fsync(fd)
        finally:
            self.close(fd)


REAL_FILES = FileOps()


def write_all(files: FileOps, fd: int, data: bytes | bytearray | memoryview) -> None:
    """Writes every byte of `data`: a write may take fewer bytes than asked, and loops on."""
    view = memoryview(data)
    while view:
        view = view[files.write(fd, view) :]

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
from pathlib import Path, PurePosixPath

__all__ = ["REAL_FILES", "FileOps", "LeadsOut", "NotRelative", "folder_path", "write_all"]


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


class NotRelative(ValueError):
    """A name that is not a relative path without '..' (see `folder_path`)."""


class LeadsOut(ValueError):
    """A path that, its symlinks followed, leaves its folder (see `folder_path`)."""


def folder_path(folder: Path, name: str) -> Path:
    """The real path that `name` names inside `folder`, for a file the server reads or
    writes there on a caller's word (`COPY t FROM 'file'`, `BACKUP DATABASE d TO 'name'`).

    The one rule for such names: NotRelative for an absolute path, a '..', a backslash or
    nothing; LeadsOut when the path, its symlinks followed, is not inside `folder`. The path
    need not exist.
    """
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts or "\\" in name:
        raise NotRelative(name)
    try:
        real = folder.joinpath(*relative.parts).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        raise LeadsOut(name) from None
    if not real.is_relative_to(folder.resolve()):
        raise LeadsOut(name)
    return real


def write_all(files: FileOps, fd: int, data: bytes | bytearray | memoryview) -> None:
    """Writes every byte of `data`: a write may take fewer bytes than asked, and loops on."""
    view = memoryview(data)
    while view:
        view = view[files.write(fd, view) :]

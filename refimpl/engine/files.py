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

import errno
import os
from collections.abc import Sequence
from pathlib import Path, PurePosixPath

__all__ = [
    "REAL_FILES",
    "UNSUPPORTED",
    "BadName",
    "Buffer",
    "FileOps",
    "LeadsOut",
    "NotRelative",
    "folder_path",
    "pwrite_synced",
    "write_all",
    "write_all_synced",
]

Buffer = bytes | bytearray | memoryview  # what a write takes

# pwritev2's flag that makes a write synchronized (O_DSYNC for this call alone: Linux 4.7+).
_DSYNC: int | None = getattr(os, "RWF_DSYNC", None) if hasattr(os, "pwritev") else None

# The most buffers one call takes (Linux's IOV_MAX; POSIX lets it be as low as 16).
_MOST_BUFFERS = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 16

# What a kernel or C library without the flag (or without pwritev2) answers, before it writes
# anything.
UNSUPPORTED = (errno.EOPNOTSUPP, errno.ENOSYS)


def pwrite_synced(fd: int, buffers: Sequence[Buffer]) -> int:
    """One system call: writes some of `buffers`, in order, at the descriptor's offset (the
    end, for a file opened with O_APPEND), and returns once what it wrote is durable as
    `fdatasync` makes it (the data and the file's size): `pwritev2(..., RWF_DSYNC)`. Returns
    how many bytes it wrote. An OSError whose errno is in `UNSUPPORTED` means this system has
    no such call; nothing was written then."""
    if _DSYNC is None:
        raise OSError(errno.EOPNOTSUPP, "no pwritev2 with RWF_DSYNC on this system")
    return os.pwritev(fd, buffers, -1, _DSYNC)  # offset -1: the descriptor's own


class FileOps:
    """File operations as the engine needs them; every method is one system call or two."""

    _one_call = True  # `write` and `fsync` are these: `write_synced` is one system call

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._one_call = cls.write is FileOps.write and cls.fsync is FileOps.fsync

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | getattr(os, "O_CLOEXEC", 0), mode)

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        """Writes some of `data`; returns how many bytes (maybe fewer: see `write_all`)."""
        return os.write(fd, data)

    def write_at(self, fd: int, data: bytes | bytearray | memoryview, offset: int) -> int:
        """Writes some of `data` at byte `offset` of the file, whatever the descriptor's
        position (which stays); returns how many bytes."""
        return os.pwrite(fd, data, offset)

    def seek(self, fd: int, offset: int) -> None:
        """Sets the descriptor's position (where `write` and `write_synced` go next) to
        byte `offset`: a descriptor's own state, no change to the file."""
        os.lseek(fd, offset, os.SEEK_SET)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def write_synced(self, fd: int, buffers: Sequence[Buffer]) -> int:
        """Writes some of `buffers`, in order, and returns once what it wrote is durable (as
        `write` and then `fsync` would make it; the file's size included); returns how many
        bytes. One system call here (`pwrite_synced`). A subclass that changes `write` or
        `fsync` and not this sees these writes through them, a `write_all` and an `fsync`
        (all the bytes, then): its faults and its view of what is durable hold for them.
        An OSError whose errno is in `UNSUPPORTED`: the system has no such call, nothing was
        written, and the caller writes and syncs in two steps."""
        if self._one_call:
            return pwrite_synced(fd, buffers)
        written = 0
        for data in buffers:
            write_all(self, fd, data)
            written += len(data)
        self.fsync(fd)
        return written

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


class BadName(NotRelative):
    """A name no file system takes (see `folder_path`); `why` says what is wrong with it,
    in words a message can end with. A NotRelative, so a caller that handles only that
    still refuses it."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(name)
        self.why = why


class LeadsOut(ValueError):
    """A path that, its symlinks followed, leaves its folder (see `folder_path`)."""


# What a file system takes in one part of a path and, with room for the data folder's own
# path before it, in the whole name (Linux: NAME_MAX 255, PATH_MAX 4096 bytes).
PART_BYTES = 255
NAME_BYTES = 1024


def _check_name(name: str) -> None:
    """BadName for a control character (NUL among them: the OS refuses it with a
    ValueError) or a name longer than a file system takes (an OSError at its first use)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise BadName(
            name,
            "a file's name cannot hold a control character (such as NUL or a line break);"
            " name it with printable characters",
        )
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no file's name is made of it
        raise BadName(name, "the name is not valid UTF-8") from None
    longest = max(len(part.encode("utf-8")) for part in name.split("/"))
    if len(encoded) > NAME_BYTES or longest > PART_BYTES:
        raise BadName(
            name,
            f"the name is too long ({len(encoded)} bytes, its longest part {longest}); at most"
            f" {PART_BYTES} bytes a part and {NAME_BYTES} in all",
        )


def folder_path(folder: Path, name: str) -> Path:
    """The real path that `name` names inside `folder`, for a file the server reads or
    writes there on a caller's word (`COPY t FROM 'file'`, `BACKUP DATABASE d TO 'name'`).

    The one rule for such names: NotRelative for an absolute path, a '..', a backslash or
    nothing; BadName (a NotRelative) for a control character, bad UTF-8 or a name too long
    for a file system; LeadsOut when the path, its symlinks followed, is not inside
    `folder`. The path need not exist.
    """
    relative = PurePosixPath(name)
    if not name or relative.is_absolute() or ".." in relative.parts or "\\" in name:
        raise NotRelative(name)
    _check_name(name)
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


def write_all_synced(files: FileOps, fd: int, buffers: Sequence[Buffer]) -> None:
    """Writes every byte of `buffers`, in order, and returns once they are durable, in
    `files.write_synced` calls (more than one only after a short write). An OSError whose
    errno is in `UNSUPPORTED`: nothing was written."""
    left = sum(map(len, buffers))
    while left:
        # At most IOV_MAX buffers a call (more is EINVAL); the rest as after a short write.
        written = files.write_synced(fd, buffers[:_MOST_BUFFERS])
        left -= written
        if left:  # short: what it did not take, from where it stopped
            views = [memoryview(data) for data in buffers]
            while written >= len(views[0]):
                written -= len(views.pop(0))
            views[0] = views[0][written:]
            buffers = views


def replace_durably(files: FileOps, target: Path, data: bytes) -> None:
    """`target` holds `data`, whole or not at all, and durably: `replace_whole`, then the
    folder's fsync (a rename is durable only then)."""
    replace_whole(files, target, data)
    files.sync_directory(target.parent)


def replace_whole(files: FileOps, target: Path, data: bytes) -> None:
    """`target` holds `data`, whole or not at all: a temporary file beside it (readable by
    the owner alone), fsync, rename. The rename is not yet durable: the caller syncs the
    folder (`replace_durably` does). On an error the temporary file is removed and the
    error raised."""
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        fd = files.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            write_all(files, fd, data)
            files.fsync(fd)
        finally:
            files.close(fd)
        files.replace(temporary, target)
    except OSError:
        try:
            files.unlink(temporary)
        except OSError:
            pass  # the first error is the one to report
        raise

"""A full disk, said once and clearly: the free space a run needs at its start, and the error a write that
ran out of space becomes.

Every warehouse write goes to a temporary file that is renamed into place only once written (and a failed
write's temporary file is removed), so a write cut short by a full disk leaves nothing a query can see, and
the same command, run again once space is freed, writes what is missing (every finished stage comes from
the stage cache).
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path


class DiskFullError(OSError):
    """The data root's disk is full, or below the free space a run needs (``limits.min_free_mb``): one line that
    says which folder, how much is free, that nothing half-written is visible, and how to go on."""

    def __init__(self, message: str):
        super().__init__(errno.ENOSPC, message)

    def __reduce__(self):  # crosses processes (a Dask worker's question) as its message
        return (type(self), (self.strerror,))

    def __str__(self) -> str:
        return self.strerror


def free_mb(path: Path) -> float:
    """Free megabytes, for an unprivileged user, on the file system that holds ``path`` (or its nearest
    existing parent)."""
    probe = Path(path)
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    st = os.statvfs(probe)
    return st.f_bavail * st.f_frsize / 1e6


def ensure_free(folder: Path, floor_mb: float) -> None:
    """Raise ``DiskFullError`` when the disk of ``folder`` has less than ``floor_mb`` free (0: never)."""
    if floor_mb > 0 and (free := free_mb(folder)) < floor_mb:
        raise DiskFullError(
            f"{DISK_FULL} {folder}: {free:.1f} MB free, below limits.min_free_mb={floor_mb:g}; "
            f"nothing was written; {RESUME} (or lower the floor: --set limits.min_free_mb=N)"
        )


DISK_FULL = "disk full at"  # how every DiskFullError line starts
RESUME = "run the same command again once space is freed: it resumes where it stopped"


def is_disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what caused it) is a write that found no space left (ENOSPC, a quota, or SQLite's
    "database or disk is full")."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, DiskFullError) or (
            isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        ):
            return True
        if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:  # a cache's SQLite file found no space
            return True
        if "No space left on device" in str(exc):  # a library that wrapped the OSError in its own type
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


def disk_full(folder: Path, exc: BaseException | None = None) -> DiskFullError:
    """The clear error for a write under ``folder`` that ran out of space (``exc``: what the write raised)."""
    if isinstance(exc, DiskFullError):
        return exc
    return DiskFullError(
        f"{DISK_FULL} {folder}: {free_mb(folder):.1f} MB free; nothing half-written is visible "
        f"(each write goes to a temporary file, renamed into place once whole); {RESUME}"
    )

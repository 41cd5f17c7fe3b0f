"""Which warehouse files can be read, and where a damaged one goes.

A Parquet file starts and ends with the magic bytes ``PAR1``; before the closing magic are the footer's
length and the footer (the schema and where every page is). A file cut short, overwritten or half copied
fails that check, which reads a few bytes and the footer: ``footer_problem``. Its answer is kept per
(path, size, modification time), so a process checks each file once, and again only when it changes.
``deep_problem`` reads every page too, and verifies the page checksums the warehouse writes.

A damaged file is never deleted: ``quarantine`` moves it under ``quarantine/<when>/`` in the data root,
keeping its path below ``tables/``, so it can be looked at or put back.
"""

from __future__ import annotations

import shutil
import struct
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq

MAGIC = b"PAR1"
QUARANTINE = "quarantine"
_CHECKED: dict[tuple[str, int, int], str | None] = {}  # (path, size, mtime_ns) -> the problem, or None
_LOCK = threading.Lock()


def repair_command(run_id: str) -> str:
    return f"hifirag warehouse check --repair --run {run_id}"


@dataclass(frozen=True)
class DamagedFile:
    """A warehouse file that cannot be read (or is gone), with the table and run it holds rows of."""

    path: Path
    table: str
    run_id: str
    reason: str

    def line(self, root: Path, then: str = "") -> str:
        """What a command that skipped it says, in one line: the file, its table and run, why, what the command
        did instead (``then``), and the fix."""
        where = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return (
            f"INCOMPLETE: skipped {where} (table {self.table}, run {self.run_id}): {self.reason}; "
            f"{then + '; ' if then else ''}repair with: {repair_command(self.run_id)}"
        )


def located(path: Path, reason: str) -> DamagedFile:
    """A damaged file named by its place: ``tables/<table>/run_id=<run>/<file>``."""
    run = path.parent.name.removeprefix("run_id=")
    return DamagedFile(path, path.parent.parent.name, run, reason)


def _stat_key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (str(path), st.st_size, st.st_mtime_ns)


def footer_problem(path: Path) -> str | None:
    """Why ``path`` is not a readable Parquet file by its magic bytes and footer (None: it is); cached by
    (path, size, modification time). A file gone meanwhile (compacted away) is not a problem of its own."""
    key = _stat_key(path)
    if key is None:
        return None
    with _LOCK:
        if key in _CHECKED:
            return _CHECKED[key]
    problem = _read_footer(path, key[1])
    with _LOCK:
        _CHECKED[key] = problem
    return problem


def _read_footer(path: Path, size: int) -> str | None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            if size < 12:
                return f"only {size} bytes, too short for a Parquet file"
            fh.seek(size - 8)
            tail = fh.read(8)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if head != MAGIC:
        return "does not start as a Parquet file (no magic bytes)"
    if tail[4:] != MAGIC:
        return f"no Parquet footer at its end ({size} bytes: cut short?)"
    (footer_len,) = struct.unpack("<I", tail[:4])
    if footer_len + 12 > size:
        return f"its footer says {footer_len} bytes, more than the file's {size} (cut short?)"
    try:
        pq.read_metadata(path)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001  (pyarrow raises several types for a bad footer)
        return f"unreadable footer ({_first_line(exc)})"
    return None


def deep_problem(path: Path) -> str | None:
    """Why ``path`` cannot be read whole: its footer, then every page, verifying the page checksums where
    the file has them (None: it reads)."""
    if problem := footer_problem(path):
        return problem
    try:
        pq.ParquetFile(path, page_checksum_verification=True).read()
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001
        return f"a page cannot be read ({_first_line(exc)})"
    return None


def mark_damaged(path: Path, reason: str) -> None:
    """Remember that ``path`` (as it is now) cannot be read: a reader met an error in it past its footer."""
    key = _stat_key(path)
    if key is not None:
        with _LOCK:
            _CHECKED[key] = reason


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def quarantine(root: Path, damaged: DamagedFile, when: datetime | None = None) -> Path:
    """Move a damaged file out of ``tables/`` into ``quarantine/<when>/``, same path below; never delete it."""
    tables = root / "tables"
    stamp = (when or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = root / QUARANTINE / stamp / damaged.path.relative_to(tables)
    target.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while target.exists():  # the same name quarantined twice in one second keeps both
        target = target.with_name(f"{damaged.path.name}.{n}")
        n += 1
    shutil.move(damaged.path, target)
    return target

"""The SQLite file under a cache below a stage (pages, search answers): shared by threads, runs and processes."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def open_cache(path: Path, schema: str) -> sqlite3.Connection:
    """A connection to the cache at ``path`` (made, with ``schema``, when missing): write-ahead log, autocommit,
    usable from any thread (callers hold their own lock), waiting up to a minute for another process's write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(schema)
    return db

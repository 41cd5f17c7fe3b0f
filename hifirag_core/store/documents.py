"""The documents search providers sent with their results (MMU-RAGent's FineWeb and ClueWeb22), under the data root.

The fetch stage reads a found URL's text from the provider's answer instead of fetching it
(``backends/carried.py``). That answer may come from a cache (the search stage's, or the search cache below it)
in a later process than the one that searched, with the provider's memory empty; so each document is also kept
here, by provider and URL, in one SQLite file shared by runs and processes (as the page cache is for pages).
The indexes are fixed crawls, so a document does not age.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path

from hifirag_core.store.sqlite_cache import open_cache

_SCHEMA = ("CREATE TABLE IF NOT EXISTS documents (provider TEXT, url TEXT, doc_id TEXT, text TEXT, kept_at REAL, "
           "PRIMARY KEY (provider, url))")


class DocumentStore:
    """(provider, URL) -> the document's text and its id at the provider."""

    def __init__(self, path: Path):
        self._db = open_cache(path, _SCHEMA)
        self._lock = threading.Lock()

    def put(self, provider: str, documents: Iterable[tuple[str, str, str]]) -> None:
        """Keep ``(url, text, doc_id)`` documents of ``provider``."""
        rows = [(provider, url, doc_id, text, time.time()) for url, text, doc_id in documents]
        if not rows:
            return
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO documents (provider, url, doc_id, text, kept_at) "
                                 "VALUES (?, ?, ?, ?, ?)", rows)

    def get(self, provider: str, url: str) -> tuple[str, str] | None:
        """The text and id of ``provider``'s document at ``url`` (None when none was kept)."""
        with self._lock:
            row = self._db.execute("SELECT text, doc_id FROM documents WHERE provider = ? AND url = ?",
                                   (provider, url)).fetchone()
        return (row[0], row[1]) if row else None

"""The page cache below the fetch stage: each URL's last good fetch, so a live page is crawled again only
when it is older than ``fetch.max_age_hours``. One SQLite file under the data root, shared by runs and
processes."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from hifirag_core.records import PageRecord
from hifirag_core.store.sqlite_cache import open_cache


class PageCache:
    """URL -> the last successful fetch (content hash and headers), shared by runs and processes."""

    def __init__(self, path: Path):
        self._db = open_cache(path, "CREATE TABLE IF NOT EXISTS pages (url TEXT PRIMARY KEY, fetched_at REAL, record TEXT)")
        self._lock = threading.Lock()

    def get(self, url: str, max_age_hours: float) -> PageRecord | None:
        with self._lock:
            row = self._db.execute("SELECT fetched_at, record FROM pages WHERE url = ?", (url,)).fetchone()
        if row is None or time.time() - row[0] > max_age_hours * 3600:
            return None
        fields = json.loads(row[1])
        return PageRecord(**fields)

    def put(self, record: PageRecord) -> None:
        if not record.ok or not record.content_sha256:
            return
        keep = {k: getattr(record, k) for k in ("url", "final_url", "fetcher", "kind", "http_status",
                                                "content_type", "content_sha256", "n_bytes", "title", "text_source")}
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO pages (url, fetched_at, record) VALUES (?, ?, ?)",
                             (record.url, time.time(), json.dumps(keep)))

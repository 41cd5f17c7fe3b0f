"""Each search provider's answers by its own inputs, below the search stage.

With several providers (``search.providers``) the search stage's key holds every provider, so adding one
recomputes the stage; this cache makes that recomputation ask only the new provider: a live provider's
answer is kept under its identity, the query, the number of results and the steering it was sent, until
it is older than ``search.max_age_hours``. Failures are never kept. One SQLite file under the data root,
shared by runs and processes (as the page cache is for pages).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from hifirag_core.hashing import stable_hash
from hifirag_core.store.sqlite_cache import open_cache
from hifirag_core.types import SearchHit, SearchSteer


def provider_call_key(identity: str, query: str, num: int, steer: SearchSteer | None) -> str:
    """What one provider's answer depends on: the provider (its identity), the query, ``num`` and steering."""
    steering: Any = None
    if steer is not None and steer.active:
        steering = {
            "sites": [str(r) for r in steer.sites.sites],
            "exclude": [str(r) for r in steer.sites.exclude],
            "window": repr(steer.window),
            "language": steer.language,
        }
    return stable_hash({"provider": identity, "query": query, "num": num, "steer": steering}, 32)


class SearchCache:
    """Provider call key -> the hits it returned, with when."""

    def __init__(self, path: Path):
        self._db = open_cache(path, "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, asked_at REAL, hits TEXT)")
        self._lock = threading.Lock()

    def get(self, key: str, max_age_hours: float | None) -> list[SearchHit] | None:
        """The hits stored under ``key``, unless older than ``max_age_hours`` (None: any age)."""
        with self._lock:
            row = self._db.execute("SELECT asked_at, hits FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None or (max_age_hours is not None and time.time() - row[0] > max_age_hours * 3600):
            return None
        return [SearchHit(**h) for h in json.loads(row[1])]

    def put(self, key: str, hits: list[SearchHit]) -> None:
        body = json.dumps([{"title": h.title, "url": h.url, "snippet": h.snippet} for h in hits])
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO calls (key, asked_at, hits) VALUES (?, ?, ?)",
                (key, time.time(), body),
            )

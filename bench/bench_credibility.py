"""Benchmark of source-aware reranking: embedding the experiment corpus, and reranker queries per second.

Prints figures and ratios; asserts nothing about time.

1. Embedding: the credibility experiment's corpora (renditions of MedQuAD answers at every
   correlation of the sweep, each document as title + first ``embed_chars`` characters; a text
   shared by several corpora is embedded once) through ``Embedder`` with an on-disk cache, twice:
   the first pass pays the model for every text the cache lacks (all of them with ``--fresh``),
   the second, a new ``Embedder`` on the same file, should send nothing through the model.
2. Reranking at 5k and 50k documents on a flat index: 5k uses the first 5,000 real document
   vectors; 50k replicates the real vectors with small Gaussian noise (sigma per dimension given
   by ``--noise``, then renormalised) and repeats their source types, since we have no 50k-page
   health corpus. Queries are the experiment's real query vectors. Without the shared data both
   scales fall back to synthetic clustered vectors, and the output says so.

Usage: ``python bench/bench_credibility.py [--fresh] [--cache PATH] [--queries N]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import faiss
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hifirag_core.credibility.priors import DEFAULT_PRIORS  # noqa: E402
from hifirag_core.credibility.rerank import CredibilityReranker, weight_vector  # noqa: E402
from hifirag_core.credibility.source_types import SOURCE_TYPES  # noqa: E402
from hifirag_core.evaluation.credibility_experiment import (  # noqa: E402
    CredibilityExperimentConfig,
    embed_corpora,
    plan_experiment,
    realize_corpora,
)
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402

OUT = ROOT / "bench" / "out"


def timed(fn: Callable[[], object], repeats: int = 3, threads: int | None = None) -> tuple[float, float]:
    """Best and median wall seconds of ``repeats`` calls, with FAISS limited to ``threads`` if given.

    The best of several runs is the figure least disturbed by other processes on a shared machine;
    the median shows how much they disturbed it.
    """
    default = faiss.omp_get_max_threads()
    if threads is not None:
        faiss.omp_set_num_threads(threads)
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
    finally:
        faiss.omp_set_num_threads(default)
    return min(times), statistics.median(times)


def bench_embedding(config: CredibilityExperimentConfig, cache: Path, fresh: bool) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Embed the corpus twice over the same cache file and print both passes."""
    if fresh and cache.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{cache}{suffix}").unlink(missing_ok=True)
    start = time.perf_counter()
    corpora = realize_corpora(plan_experiment(config), config)
    corpus = corpora[config.realistic_at]
    print(f"corpora: {len(corpus.docs):,} documents at each of {len(corpora)} correlations, {len(corpus.queries)} "
          f"queries, built in {time.perf_counter() - start:.1f} s; each document embedded as title + first "
          f"{config.embed_chars} chars")
    passes = []
    for label in ("first pass", "second pass (new Embedder, same cache file)"):
        embedding = embed_corpora(corpora, Embedder(cache), config)
        rate = f"{embedding.encoded / embedding.seconds:.1f} texts/s through the model" if embedding.encoded else "all from cache"
        print(f"  {label}: {embedding.seconds:8.2f} s, {embedding.encoded:,} of {embedding.n_texts:,} distinct texts "
              f"encoded ({rate})")
        passes.append(embedding)
    size = sum(Path(f"{cache}{suffix}").stat().st_size for suffix in ("", "-wal") if Path(f"{cache}{suffix}").exists())
    print(f"  ratio first/second: {passes[0].seconds / max(passes[1].seconds, 1e-9):.0f}x; cache {cache} "
          f"({size / 1e6:.1f} MB with its write-ahead log)")
    types = [d.source_type for d in corpus.docs]
    embedded = passes[1].corpora[config.realistic_at]
    return embedded.doc_vectors, embedded.query_vectors, types


def synthetic_vectors(n: int, dim: int, rng: np.random.Generator, n_clusters: int = 500) -> np.ndarray:
    """Unit vectors around random cluster centres, so neighbours are close as in a real corpus."""
    centres = rng.normal(size=(n_clusters, dim)).astype(np.float32)
    vectors = centres[rng.integers(0, n_clusters, n)] + 0.5 * rng.normal(size=(n, dim)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def replicate(vectors: np.ndarray, types: list[str], n: int, noise: float,
              rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
    """``n`` vectors: the real ones, then noisy copies of them, renormalised; types repeat."""
    idx = np.arange(n) % len(vectors)
    out = vectors[idx].copy()
    copies = np.arange(n) >= len(vectors)
    out[copies] += noise * rng.normal(size=(int(copies.sum()), vectors.shape[1])).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out, [types[i] for i in idx]


def bench_rerank(label: str, vectors: np.ndarray, types: list[str], queries: np.ndarray, k: int = 5,
                 pool_factor: int = 3) -> None:
    """Queries per second: FAISS alone, then the full rerank, with and without smoothing."""
    build_start = time.perf_counter()
    reranker = CredibilityReranker(vectors, types)
    build = time.perf_counter() - build_start
    weights = weight_vector(DEFAULT_PRIORS)
    n_q = len(queries)
    pool = pool_factor * k

    def faiss_topk_batch() -> None:
        reranker.index.search(queries, k)

    def faiss_topk_single() -> None:
        for q in queries:
            reranker.index.search(q[None, :], k)

    def rerank_single(alpha: float | None) -> Callable[[], None]:
        def run() -> None:
            for q in queries:
                sims, ids = reranker.pool(q[None, :], pool)
                reranker.rerank(sims[0], ids[0], k, weights, alpha)
        return run

    def rerank_batch_pool() -> None:
        sims, ids = reranker.pool(queries, pool)
        for s, i in zip(sims, ids, strict=True):
            reranker.rerank(s, i, k, weights)

    pool_sims, pool_ids = reranker.pool(queries, pool)

    def rerank_only() -> None:
        for s, i in zip(pool_sims, pool_ids, strict=True):
            reranker.rerank(s, i, k, weights)

    faiss_topk_batch()  # warm-up: first touches of the index memory
    # One query at a time runs FAISS on one OpenMP thread: on a busy two-core machine, two threads
    # per single-query search spent most of their time waiting for each other (3-5x slower).
    rows = [
        ("similarity top-k, FAISS, batched queries", timed(faiss_topk_batch)),
        ("similarity top-k, FAISS, one query at a time", timed(faiss_topk_single, threads=1)),
        ("x prior: pool + rerank, one query at a time", timed(rerank_single(None), threads=1)),
        ("x prior: batched pool, rerank per query", timed(rerank_batch_pool)),
        ("x prior: the rerank step alone (pools precomputed)", timed(rerank_only, 5)),
    ]
    reranker._neighbours.clear()  # the first smoothing pass pays its neighbour searches
    rows.append(("x prior + smoothing, neighbours not yet memoised", timed(rerank_single(0.1), 1, threads=1)))
    rows.append(("x prior + smoothing, neighbours memoised", timed(rerank_single(0.1), threads=1)))
    print(f"\n{label}: {len(vectors):,} documents x {vectors.shape[1]} dims, {n_q} queries, k={k}, pool={pool}; "
          f"index built in {build * 1000:.0f} ms; FAISS threads {faiss.omp_get_max_threads()} batched, 1 per single query")
    print(f"  {'':<52} {'best q/s':>10}  {'median q/s':>10}  best ms/query")
    for name, (best, median) in rows:
        print(f"  {name:<52} {n_q / best:>10,.0f}  {n_q / median:>10,.0f}  {best * 1000 / n_q:.3f}")
    single, prior = rows[1][1][0], rows[2][1][0]
    print(f"  x prior / similarity, one query at a time (best): {prior / single:.2f}x the time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, default=OUT / "credibility_vectors.sqlite")
    parser.add_argument("--fresh", action="store_true", help="delete the cache first, so the first pass is cold")
    parser.add_argument("--queries", type=int, default=600, help="queries of the experiment corpus (default 600)")
    parser.add_argument("--noise", type=float, default=0.02, help="per-dimension noise of the replicated 50k vectors")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    config = CredibilityExperimentConfig(n_queries=args.queries)
    print(f"python {sys.version.split()[0]}, faiss {faiss.__version__}, numpy {np.__version__}")
    if config.medquad_path().exists():
        print("\n== embedding the experiment corpus ==")
        doc_vectors, query_vectors, types = bench_embedding(config, args.cache, args.fresh)
        small_n = min(5000, len(doc_vectors))
        print("\n== reranking ==")
        bench_rerank(f"{small_n:,} real MedQuAD rendition vectors", doc_vectors[:small_n], types[:small_n], query_vectors)
        big, big_types = replicate(doc_vectors, types, 50_000, args.noise, rng)
        bench_rerank(f"50k: {len(doc_vectors):,} real vectors replicated with noise sigma={args.noise}",
                     big, big_types, query_vectors)
    else:
        print(f"\nshared data absent ({config.medquad_path()}): no embedding figures; synthetic clustered "
              "vectors for both scales")
        queries = synthetic_vectors(300, 384, rng)
        for n in (5000, 50_000):
            vectors = synthetic_vectors(n, 384, rng)
            types = [SOURCE_TYPES[i] for i in rng.integers(0, len(SOURCE_TYPES), n)]
            bench_rerank(f"{n:,} synthetic clustered vectors", vectors, types, queries)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

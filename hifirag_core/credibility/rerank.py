"""Source-aware reranking: score(q, d) = sim(q, d) x prior(s_d) ** strength over a similarity candidate pool.

The paper's steps, as implemented here:

* **Pool.** FAISS ``IndexFlatIP`` over unit vectors (exact cosine) returns the ``pool_factor x k``
  most similar documents (3k in the paper). The prior only reorders this pool: a document outside
  it is never returned, whatever its source.
* **Prior.** Each pool document's weight is the prior of its source type raised to the power
  ``strength`` (lambda in docs/credibility.md): 0 ranks by similarity alone, 1 is the paper's
  ``sim x prior``, above 1 the prior counts for more. A power keeps the order invariant to a common
  factor on the priors and makes lambda the weight of log prior against log similarity.
* **One-hop smoothing (optional).** ``lambda'(d) = clip(lambda(d) + alpha * sum_{n in N(d)}
  sim(d, n) * lambda(n), 0.10, 1.00)``. Our reading of what the paper leaves open: N(d) are the
  ``smoothing_neighbours`` (3) nearest documents to d in the whole index, d itself excluded;
  lambda(n) is the neighbour's unsmoothed type weight (one hop, computed for all pool documents at
  once); the sum is not normalised, exactly as equation 3 is written, so smoothing can only raise
  a weight and it narrows the gap between high and low types.
* **Order.** Descending ``sim x weight`` (with weight = prior ** strength); ties broken by higher similarity, then by index position,
  so the order is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import faiss
import numpy as np

from hifirag_core.config import CredibilityConfig
from hifirag_core.credibility.priors import CLIP_MAX, CLIP_MIN, resolve_priors
from hifirag_core.credibility.source_types import SOURCE_TYPES, SourceRules, classify_sources

TYPE_INDEX: dict[str, int] = {t: i for i, t in enumerate(SOURCE_TYPES)}


@dataclass(frozen=True)
class PriorScore:
    """One candidate's source type, the weight applied to it, and the resulting score."""

    source_type: str
    prior: float
    final_score: float


@dataclass(frozen=True)
class Ranking:
    """The top k of one query: document indices with their similarity, weight and score."""

    doc_ids: np.ndarray  # int64, index positions in the reranker's corpus
    similarities: np.ndarray
    weights: np.ndarray
    scores: np.ndarray


def weight_vector(weights: Mapping[str, float]) -> np.ndarray:
    """Type weights as an array aligned with ``SOURCE_TYPES``."""
    missing = [t for t in SOURCE_TYPES if t not in weights]
    if missing:
        raise ValueError(f"weights are missing source types {missing}")
    return np.array([weights[t] for t in SOURCE_TYPES], dtype=np.float64)


def with_strength(priors: np.ndarray, strength: float) -> np.ndarray:
    """Priors raised to ``strength``: the weights that multiply similarity (all 1 at strength 0)."""
    if strength < 0:
        raise ValueError(f"strength must be at least 0, got {strength}")
    return np.power(np.asarray(priors, dtype=np.float64), strength)


def smooth_weights(base: np.ndarray, neighbour_sims: np.ndarray, neighbour_weights: np.ndarray,
                   alpha: float) -> np.ndarray:
    """Equation 3: clip(base + alpha * sum_n sim(d, n) * lambda(n)) row by row."""
    spread = alpha * np.sum(np.asarray(neighbour_sims, dtype=np.float64) * neighbour_weights, axis=-1)
    return np.clip(np.asarray(base, dtype=np.float64) + spread, CLIP_MIN, CLIP_MAX)


def rerank_order(sims: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Positions of the candidates by descending sim x weight (ties: similarity, then position)."""
    sims = np.asarray(sims, dtype=np.float64)
    scores = sims * np.asarray(weights, dtype=np.float64)
    positions = np.arange(len(sims))
    # np.lexsort sorts by the last key first
    return np.lexsort((positions, -sims, -scores))


class CredibilityReranker:
    """A flat inner-product index over unit document vectors, with source types per document."""

    def __init__(self, doc_vectors: np.ndarray, source_types: Sequence[str]):
        vectors = np.ascontiguousarray(doc_vectors, dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(source_types):
            raise ValueError(f"{vectors.shape} vectors for {len(source_types)} source types")
        unknown = sorted({t for t in source_types if t not in TYPE_INDEX})
        if unknown:
            raise ValueError(f"unknown source types {unknown}; use one of {', '.join(SOURCE_TYPES)}")
        self.vectors = vectors
        self.type_codes = np.array([TYPE_INDEX[t] for t in source_types], dtype=np.int64)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)
        self._neighbours: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._neighbour_count = 0

    def __len__(self) -> int:
        return int(self.index.ntotal)

    def pool(self, query_vectors: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities and document indices of the ``size`` most similar documents per query."""
        size = min(size, len(self))
        queries = np.ascontiguousarray(np.atleast_2d(query_vectors), dtype=np.float32)
        sims, ids = self.index.search(queries, size)
        return sims, ids.astype(np.int64)

    def neighbours(self, doc_ids: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Similarities and indices of each document's n nearest other documents (memoised)."""
        if n != self._neighbour_count:
            self._neighbours.clear()
            self._neighbour_count = n
        wanted = np.asarray(doc_ids, dtype=np.int64).ravel()
        missing = np.array(sorted({int(d) for d in wanted} - self._neighbours.keys()), dtype=np.int64)
        if len(missing):
            # one extra hit so the document itself can be dropped
            sims, ids = self.index.search(self.vectors[missing], min(n + 1, len(self)))
            for doc, row_sims, row_ids in zip(missing, sims, ids, strict=True):
                keep = (row_ids != doc) & (row_ids >= 0)
                self._neighbours[int(doc)] = (row_sims[keep][:n], row_ids[keep][:n].astype(np.int64))
        rows = [self._neighbours[int(d)] for d in wanted]
        width = min(len(r[0]) for r in rows) if rows else 0
        return (np.stack([r[0][:width] for r in rows]) if rows else np.zeros((0, 0), np.float32),
                np.stack([r[1][:width] for r in rows]) if rows else np.zeros((0, 0), np.int64))

    def precompute_neighbours(self, n: int, batch: int = 2048) -> None:
        """Fill the neighbour memo for every document (worth it when most will be asked for)."""
        for start in range(0, len(self), batch):
            self.neighbours(np.arange(start, min(start + batch, len(self))), n)

    def doc_weights(self, doc_ids: np.ndarray, type_weights: np.ndarray, smoothing_alpha: float | None = None,
                    n_neighbours: int = 3, strength: float = 1.0) -> np.ndarray:
        """Each document's weight: its type's prior (smoothed over its neighbours if alpha is given) ** strength."""
        base = type_weights[self.type_codes[doc_ids]]
        if smoothing_alpha is not None:
            n_sims, n_ids = self.neighbours(doc_ids, n_neighbours)
            base = smooth_weights(base, n_sims, type_weights[self.type_codes[n_ids]], smoothing_alpha)
        return with_strength(base, strength)

    def rerank(self, pool_sims: np.ndarray, pool_ids: np.ndarray, k: int, type_weights: np.ndarray | None,
               smoothing_alpha: float | None = None, n_neighbours: int = 3, strength: float = 1.0) -> Ranking:
        """The top k of one query's pool; ``type_weights=None`` or ``strength=0`` ranks by similarity alone."""
        valid = pool_ids >= 0
        sims, ids = pool_sims[valid].astype(np.float64), pool_ids[valid]
        if type_weights is None or strength == 0:
            weights = np.ones(len(ids))
        else:
            weights = self.doc_weights(ids, type_weights, smoothing_alpha, n_neighbours, strength)
        order = rerank_order(sims, weights)[:k]
        return Ranking(ids[order], sims[order], weights[order], sims[order] * weights[order])

    def search(self, query_vectors: np.ndarray, k: int, weights: Mapping[str, float] | None,
               pool_factor: int = 3, smoothing_alpha: float | None = None,
               n_neighbours: int = 3, strength: float = 1.0) -> list[Ranking]:
        """Pool of ``pool_factor x k`` by similarity, then the prior (and smoothing) reorders it."""
        type_weights = weight_vector(weights) if weights is not None else None
        pool_sims, pool_ids = self.pool(query_vectors, pool_factor * k)
        return [self.rerank(s, i, k, type_weights, smoothing_alpha, n_neighbours, strength)
                for s, i in zip(pool_sims, pool_ids, strict=True)]


def score_with_prior(urls: Sequence[str], sims: Sequence[float], config: CredibilityConfig,
                     source_types: Sequence[str | None] | None = None, *,
                     vectors: np.ndarray | None = None, rules: SourceRules | None = None) -> list[PriorScore]:
    """Source type, prior and final score for each candidate URL of a pipeline decision.

    ``source_types`` gives explicit types (from corpus metadata) that win over the URL rules.
    ``final_score`` is ``sim x prior ** config.strength``. When ``config.enabled`` is False the
    prior is still reported but ``final_score`` is the similarity,
    so a run without the prior can be compared row by row with one that uses it. With
    ``config.smoothing`` the candidates' unit ``vectors`` are required: a pipeline decision has no
    corpus-wide index, so the neighbours of a candidate are its nearest other candidates.
    """
    if len(urls) != len(sims):
        raise ValueError(f"{len(urls)} URLs but {len(sims)} similarities")
    types = classify_sources(urls, source_types, rules)
    priors = resolve_priors(config)
    weights = np.array([priors[t] for t in types], dtype=np.float64)
    sim_arr = np.asarray(sims, dtype=np.float64)
    if config.enabled and config.smoothing and len(urls) > 1:
        if vectors is None:
            raise ValueError("credibility.smoothing needs the candidates' vectors: pass vectors=, "
                             "or set credibility.smoothing=false")
        vecs = np.asarray(vectors, dtype=np.float64)
        if vecs.shape[0] != len(urls):
            raise ValueError(f"{vecs.shape[0]} vectors for {len(urls)} candidates")
        gram = vecs @ vecs.T
        np.fill_diagonal(gram, -np.inf)  # a candidate is not its own neighbour
        n = min(config.smoothing_neighbours, len(urls) - 1)
        order = np.argsort(-gram, axis=1, kind="stable")[:, :n]  # stable: ties go to the earlier candidate
        n_sims = np.take_along_axis(gram, order, axis=1)
        weights = smooth_weights(weights, n_sims, weights[order], config.smoothing_alpha)
    finals = sim_arr * with_strength(weights, config.strength) if config.enabled else sim_arr
    return [PriorScore(t, float(w), float(f)) for t, w, f in zip(types, weights, finals, strict=True)]

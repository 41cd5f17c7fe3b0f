"""Scoring small candidate sets against a question: BM25, MiniLM cosine, their blend, and MMR."""

from __future__ import annotations

from collections.abc import Sequence

import bm25s
import numpy as np
import Stemmer

from hifirag_core.retrieval.embeddings import Embedder

_STEMMER = Stemmer.Stemmer("english")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(list(texts), stopwords="en", stemmer=_STEMMER, show_progress=False, return_ids=False)


def bm25_scores(query: str, texts: Sequence[str]) -> np.ndarray:
    """BM25 of ``query`` against each text, with statistics from the candidate set itself."""
    if not texts:
        return np.zeros(0, dtype=np.float32)
    query_tokens = tokenize([query])[0]
    doc_tokens = tokenize(texts)
    if not query_tokens or not any(doc_tokens):
        return np.zeros(len(texts), dtype=np.float32)
    index = bm25s.BM25()
    index.index(doc_tokens, show_progress=False)
    return np.asarray(index.get_scores(query_tokens), dtype=np.float32)


def hybrid_scores(query: str, texts: Sequence[str], embedder: Embedder, dense_weight: float = 0.7,
                  shortlist: int | None = None) -> np.ndarray:
    """``dense_weight`` x cosine + the rest x BM25 scaled to [0, 1] within the set.

    Cosine carries meaning across paraphrase; BM25 rewards the exact rare terms (identifiers,
    option names) that MiniLM blurs. The blend keeps magnitudes, so relative thresholds work.
    With ``shortlist``, only the ``shortlist`` texts BM25 ranks highest are embedded (MiniLM is
    nearly all of the cost); the others keep their lexical part alone.
    """
    if not texts:
        return np.zeros(0, dtype=np.float32)
    lexical = bm25_scores(query, texts)
    top = float(lexical.max()) if lexical.size else 0.0
    lexical = lexical / top if top > 0 else lexical
    if shortlist is None or len(texts) <= shortlist:
        cosine = embedder.encode(list(texts)) @ embedder.encode_one(query)
    else:
        chosen = np.argsort(-lexical, kind="stable")[:shortlist]  # ties: the earlier text
        cosine = np.zeros(len(texts), dtype=np.float32)
        cosine[chosen] = embedder.encode([texts[int(i)] for i in chosen]) @ embedder.encode_one(query)
    return (dense_weight * cosine + (1 - dense_weight) * lexical).astype(np.float32)


def keep_relative(scores: np.ndarray, *, min_relative: float, limit: int, floor: float = 0.0) -> list[int]:
    """Indices by descending score, keeping those within ``min_relative`` of the best, at most ``limit``."""
    if scores.size == 0 or limit <= 0:
        return []
    best = float(scores.max())
    order = np.argsort(-scores, kind="stable")
    kept = [int(i) for i in order if scores[i] > floor and scores[i] >= best * min_relative]
    return kept[:limit]


def mmr_select(
    relevance: np.ndarray,
    vectors: np.ndarray,
    costs: Sequence[int],
    budget: int,
    lam: float = 0.7,
) -> list[int]:
    """Maximal marginal relevance: pick items until their summed cost reaches ``budget``.

    Each step takes the item maximizing ``lam * relevance - (1 - lam) * max similarity to the
    items already picked``; an item that would overshoot the budget by more than half its own
    cost is skipped, so the result lands close to the budget.
    """
    chosen: list[int] = []
    spent = 0
    remaining = set(range(len(relevance)))
    max_sim = np.zeros(len(relevance), dtype=np.float32)
    while remaining and spent < budget:
        best, best_value = -1, -np.inf
        for i in remaining:
            value = lam * relevance[i] - (1 - lam) * max_sim[i]
            if value > best_value:
                best, best_value = i, value
        remaining.discard(best)
        if chosen and spent + costs[best] > budget + costs[best] / 2:
            continue
        chosen.append(best)
        spent += costs[best]
        max_sim = np.maximum(max_sim, vectors @ vectors[best])
    return chosen

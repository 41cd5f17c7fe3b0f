"""Ranked-retrieval metrics for one query: P@k, NDCG@k, reciprocal rank, adversarial and credibility rates.

Relevance is either a set of relevant ids (binary) or a mapping from id to a graded label (0 is
not relevant). A ranking is a sequence of ids, best first; an id that appears twice counts once.
Every function returns a plain float so callers can average over queries and bootstrap the means.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence

Relevance = Mapping[str, float] | Collection[str]


def _grades(relevance: Relevance) -> Mapping[str, float]:
    if isinstance(relevance, Mapping):
        return relevance
    return dict.fromkeys(relevance, 1.0)


def _top(ranked: Sequence[str], k: int | None) -> list[str]:
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    seen: set[str] = set()
    out: list[str] = []
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out if k is None else out[:k]


def precision_at_k(ranked: Sequence[str], relevance: Relevance, k: int) -> float:
    """Relevant documents (grade > 0) among the top k, divided by k even if fewer were returned."""
    grades = _grades(relevance)
    return sum(1 for d in _top(ranked, k) if grades.get(d, 0) > 0) / k


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain with linear gains: sum of gain_i / log2(i + 1), i from 1."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def ndcg_at_k(ranked: Sequence[str], relevance: Relevance, k: int) -> float:
    """DCG@k of the ranking over DCG@k of the ideal ordering of all labelled documents (0 if none)."""
    grades = _grades(relevance)
    ideal = dcg(sorted((g for g in grades.values() if g > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([grades.get(d, 0.0) for d in _top(ranked, k)]) / ideal


def reciprocal_rank(ranked: Sequence[str], relevance: Relevance, k: int | None = None) -> float:
    """1 / rank of the first relevant document within the top k (all of it if k is None), else 0."""
    grades = _grades(relevance)
    for rank, doc in enumerate(_top(ranked, k), start=1):
        if grades.get(doc, 0) > 0:
            return 1.0 / rank
    return 0.0


def adversarial_hit_rate(ranked: Sequence[str], adversarial: Collection[str], k: int) -> float:
    """Adversarial documents among the top k, divided by k (the paper's adversarial hit rate)."""
    return sum(1 for d in _top(ranked, k) if d in adversarial) / k


def mean_credibility_at_k(credibility: Sequence[float], k: int) -> float:
    """Mean credibility of the first k results (given in rank order); 0 for an empty list."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top = list(credibility[:k])
    return sum(top) / len(top) if top else 0.0


def high_credibility_ratio(credibility: Sequence[float], k: int, threshold: float = 0.70) -> float:
    """Share of the first k results (those returned) whose credibility is at least ``threshold``."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    top = list(credibility[:k])
    return sum(1 for c in top if c >= threshold) / len(top) if top else 0.0

"""How relevant a candidate is to the question, where a decision gave no score of its own: MiniLM cosine."""


from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hifirag_core.pipeline.runtime import Runtime


def similarities(question: str, texts: list[str], scores: list[float] | None, rt: Runtime) -> list[float]:
    """The decision's own relevance scores, or (for an LLM's list) MiniLM cosine to the question."""
    if scores is not None:
        return list(scores)
    return [float(x) for x in rt.embedder.encode(texts) @ rt.embedder.encode_one(question)] if texts else []


def similarity(rt: Runtime) -> Callable[[str, list[str]], np.ndarray]:
    """MiniLM cosine of each text to the question, through the run's cached embedder."""
    return lambda q, texts: rt.embedder.encode(texts) @ rt.embedder.encode_one(q)

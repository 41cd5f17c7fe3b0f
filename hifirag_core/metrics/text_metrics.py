"""Answer-vs-reference text metrics, computed the way the MMU-RAGent organisers did."""

from __future__ import annotations

from collections.abc import Sequence

from rouge_score import rouge_scorer

_SCORER = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> tuple[float, float, float]:
    """ROUGE-L (``rouge-score``, rougeL, stemmer on): precision, recall, F1."""
    score = _SCORER.score(reference, prediction)["rougeL"]
    return score.precision, score.recall, score.fmeasure


def rouge_l_f1(predictions: Sequence[str], references: Sequence[str]) -> list[float]:
    """Per-question ROUGE-L F1."""
    return [rouge_l(p, r)[2] for p, r in zip(predictions, references, strict=True)]

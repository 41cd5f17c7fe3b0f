"""The post-query weight update (paper, equation 4), driven by simulated feedback on correctness.

``lambda_{t+1}(s) = clip(lambda_t(s) + eta * delta_t, 0.10, 1.00)`` with eta = 0.05. The paper
simulates its feedback from ground-truth labels; here the simulated user judges only what it was
shown, and only whether it is true:

* After query t is ranked with lambda_t, each document d in its top k gives a feedback value:
  delta = +0.3 if d is correct, -0.5 if d is corrupted (the paper's values for a good and an
  adversarial document). The paper's third case ("-0.1 otherwise", for a type other than the
  query's expected relevant type) has no counterpart: the feedback never reads a relevance label
  or an expected type.
* Each document's feedback goes to its own source type; a type that appears several times in the
  top k gets the mean of its documents' values, so one query moves a type by at most eta x 0.5.
  Types absent from the top k are not changed.
* Query t itself is ranked with lambda_t (before its own feedback). The experiment learns only on
  its tuning half of the queries and reports on the other half with the learned weights frozen,
  so no reported query's labels ever reach a ranking.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hifirag_core.credibility.priors import clip_weight


@dataclass(frozen=True)
class FeedbackRule:
    """The paper's update rate and feedback values."""

    eta: float = 0.05
    delta_correct: float = 0.3
    delta_corrupted: float = -0.5


def correctness_feedback(top_types: Sequence[str], top_correct: Sequence[bool],
                         rule: FeedbackRule = FeedbackRule()) -> dict[str, float]:
    """Simulated feedback on the documents shown: the mean feedback value per source type."""
    if len(top_types) != len(top_correct):
        raise ValueError(f"{len(top_types)} types but {len(top_correct)} correctness flags")
    values: dict[str, list[float]] = defaultdict(list)
    for source_type, correct in zip(top_types, top_correct, strict=True):
        values[source_type].append(rule.delta_correct if correct else rule.delta_corrupted)
    return {t: sum(v) / len(v) for t, v in values.items()}


def update_weights(weights: Mapping[str, float], feedback: Mapping[str, float],
                   rule: FeedbackRule = FeedbackRule()) -> dict[str, float]:
    """Equation 4 for every type that received feedback; the others are copied unchanged."""
    unknown = set(feedback) - set(weights)
    if unknown:
        raise ValueError(f"feedback for types without a weight: {sorted(unknown)}")
    return {t: clip_weight(w + rule.eta * feedback[t]) if t in feedback else w for t, w in weights.items()}


def converged_at(history: Sequence[Mapping[str, float]], types: Sequence[str], window: int = 3,
                 tolerance: float = 0.01) -> int | None:
    """First step whose trailing ``window`` mean absolute weight change is below ``tolerance``.

    ``history[0]`` is the initial weights and ``history[t]`` the weights after query t; the change
    at step t averages ``|lambda_t(s) - lambda_{t-1}(s)|`` over ``types`` (paper, section 4.3).
    """
    changes = [sum(abs(history[t][s] - history[t - 1][s]) for s in types) / len(types)
               for t in range(1, len(history))]
    for end in range(window, len(changes) + 1):
        if sum(changes[end - window:end]) / window < tolerance:
            return end
    return None

"""The post-query weight update (paper, equation 4), driven by ORACLE feedback from relevance labels.

``lambda_{t+1}(s) = clip(lambda_t(s) + eta * delta_t, 0.10, 1.00)`` with eta = 0.05. The paper's
feedback is simulated from ground-truth labels, not from users, so results of this component show
how the rule behaves under ideal feedback, never that it learns from real use.

Our reading of what the paper leaves open:

* After query t is ranked with lambda_t, each document d in its top k gives a feedback value:
  delta = -0.5 if d is adversarial (checked first), +0.3 if d's source type is the query's
  expected relevant type, -0.1 otherwise.
* The expected relevant type of a query is the source type of the document its question was
  taken from (the gold document). It is one type per query.
* Each document's feedback goes to its own source type; a type that appears several times in the
  top k gets the mean of its documents' values, so one query moves a type by at most eta x 0.5.
  Types absent from the top k are not changed.
* Query t itself is scored with lambda_t (the weights before its own feedback): evaluation is
  prequential, and the labels of a query never influence its own ranking.
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
    delta_match: float = 0.3
    delta_adversarial: float = -0.5
    delta_other: float = -0.1


def oracle_feedback(top_types: Sequence[str], top_adversarial: Sequence[bool], expected_type: str,
                    rule: FeedbackRule = FeedbackRule()) -> dict[str, float]:
    """ORACLE: the mean feedback value per source type over one query's top k."""
    if len(top_types) != len(top_adversarial):
        raise ValueError(f"{len(top_types)} types but {len(top_adversarial)} adversarial flags")
    values: dict[str, list[float]] = defaultdict(list)
    for source_type, adversarial in zip(top_types, top_adversarial, strict=True):
        if adversarial:
            delta = rule.delta_adversarial
        elif source_type == expected_type:
            delta = rule.delta_match
        else:
            delta = rule.delta_other
        values[source_type].append(delta)
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

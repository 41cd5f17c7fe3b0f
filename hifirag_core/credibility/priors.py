"""Credibility priors (the paper's lambda(source type)) and their clipping range."""

from __future__ import annotations

from collections.abc import Mapping

from hifirag_core.config import CredibilityConfig
from hifirag_core.credibility.source_types import SOURCE_TYPES

# These are the values third-party notes attribute to table 1 of the source-aware reranking paper
# (Tata Koganti and Garrido-Lestache Belinchon, arXiv 2607.22584); our copy of the paper names the
# table but does not contain its numbers. The paper calls them domain-informed
# assumptions, not learned and not claimed to be optimal.
DEFAULT_PRIORS: Mapping[str, float] = {
    "peer_reviewed": 0.95,
    "government": 0.90,
    "established_news": 0.75,
    "organization_report": 0.70,
    "blog": 0.50,
    "user_generated": 0.40,
    "unknown": 0.35,
    "ai_generated": 0.30,
}

# The paper clips smoothed and updated weights to this range (its equations 3 and 4).
CLIP_MIN = 0.10
CLIP_MAX = 1.00


def clip_weight(value: float) -> float:
    """A weight limited to the paper's range [0.10, 1.00]."""
    return min(CLIP_MAX, max(CLIP_MIN, value))


def resolve_priors(config: CredibilityConfig | None = None) -> dict[str, float]:
    """The defaults with the config's overrides on top: one weight for every source type."""
    priors = dict(DEFAULT_PRIORS)
    if config is not None and config.priors:
        priors.update(config.priors)
    missing = [t for t in SOURCE_TYPES if t not in priors]
    if missing:  # only reachable if DEFAULT_PRIORS and SourceType drift apart
        raise ValueError(f"no prior for source types {missing}")
    return priors

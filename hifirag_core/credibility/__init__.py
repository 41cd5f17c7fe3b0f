"""Source-aware reranking with credibility priors (the second paper): source typing, priors, reranking.

The pipeline calls ``score_with_prior`` for its URL and section decisions; the experiment lives
in ``hifirag_core.credibility.experiment``. Importing this package registers the experiment's
warehouse tables (``hifirag_core.credibility.records``).
"""

from hifirag_core.credibility import records as records  # registers the experiment tables
from hifirag_core.credibility.priors import CLIP_MAX, CLIP_MIN, DEFAULT_PRIORS, resolve_priors
from hifirag_core.credibility.rerank import (
    CredibilityReranker,
    PriorScore,
    Ranking,
    score_with_prior,
    with_strength,
)
from hifirag_core.credibility.sources import (
    SOURCE_TYPES,
    SourceRules,
    classify_source,
    classify_sources,
    load_rules,
)
from hifirag_core.credibility.update import FeedbackRule, correctness_feedback, update_weights

__all__ = [
    "CLIP_MAX",
    "CLIP_MIN",
    "DEFAULT_PRIORS",
    "SOURCE_TYPES",
    "CredibilityReranker",
    "FeedbackRule",
    "PriorScore",
    "Ranking",
    "SourceRules",
    "classify_source",
    "classify_sources",
    "correctness_feedback",
    "load_rules",
    "resolve_priors",
    "score_with_prior",
    "update_weights",
    "with_strength",
]

"""Source-aware reranking with credibility priors (the second paper): source typing, priors, reranking.

The pipeline calls ``rerank.score_with_prior`` for its URL and section decisions; the experiment lives
in ``experiment`` (its warehouse tables in ``hifirag_core.records.credibility``).
"""

"""Warehouse tables of the credibility experiment.

Every row carries ``experiment_id`` (a hash of the experiment config and the corpus) and the
``correlation`` of the corpus it was measured on, so sweeps with different settings stay apart in
SQL. ``strength`` is lambda (0: similarity only); ``half`` is the query half (``tune`` for
choosing, ``report`` for reporting).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hifirag_core.records import Record

STAGE = "credibility_experiment"


@dataclass(kw_only=True)
class CredibilityDocRecord(Record):
    """One document of the corpus at one correlation."""

    TABLE: ClassVar[str] = "credibility_corpus"
    stage: str = STAGE
    experiment_id: str = ""
    namespace: str = ""
    correlation: float = 0.0
    doc_id: str = ""
    url: str = ""
    title: str = ""
    source_type: str = ""
    focus: str = ""
    question_key: str = ""
    origin_doc_id: str = ""
    origin_qid: str = ""
    corrupted: bool = False
    corruption: str | None = None  # dose | negation | date, when corrupted
    changes: list[str] = field(default_factory=list)  # what the corruption made false
    n_chars: int = 0


@dataclass(kw_only=True)
class CredibilityRateRecord(Record):
    """A source type's share and corruption rate at one correlation, configured and realised."""

    TABLE: ClassVar[str] = "credibility_rates"
    stage: str = STAGE
    experiment_id: str = ""
    correlation: float = 0.0
    source_type: str = ""
    prior: float = 0.0
    share: float = 0.0  # configured share of documents
    rate: float = 0.0  # configured corruption rate
    n_docs: int = 0
    n_corrupted: int = 0
    # Pearson correlation over all documents between the type's prior and being correct (the
    # same on every row of one correlation): what the correlation parameter amounts to
    prior_correct_corr: float = 0.0


@dataclass(kw_only=True)
class CredibilityQueryRecord(Record):
    """One query's top results under one system, strength and correlation, with its metrics."""

    TABLE: ClassVar[str] = "credibility_query_results"
    stage: str = STAGE
    experiment_id: str = ""
    correlation: float = 0.0
    strength: float = 0.0
    system: str = ""
    half: str = ""  # tune | report
    feedback: bool = False  # weights learned from simulated feedback on the tune half
    step: int = 0  # position of the query in the processing order
    query: str = ""
    qtype: str = ""
    k: int = 5
    precision: float = 0.0  # relevant and correct among the top k
    ndcg: float = 0.0  # over relevant-and-correct documents, at ndcg_k
    adversarial_hit_rate: float = 0.0  # corrupted among the top k
    topical_precision: float = 0.0  # relevant among the top k, correct or not
    mean_credibility: float = 0.0
    n_relevant: int = 0
    n_hits: int = 0  # relevant and correct documents in the corpus
    top_doc_ids: list[str] = field(default_factory=list)
    top_source_types: list[str] = field(default_factory=list)
    top_similarities: list[float] = field(default_factory=list)
    top_weights: list[float] = field(default_factory=list)


@dataclass(kw_only=True)
class CredibilitySummaryRecord(Record):
    """Mean of one metric over one half's queries, with its interval and the paired gain over similarity."""

    TABLE: ClassVar[str] = "credibility_summary"
    stage: str = STAGE
    experiment_id: str = ""
    correlation: float = 0.0
    strength: float = 0.0
    system: str = ""
    half: str = ""
    feedback: bool = False
    metric: str = ""
    k: int = 5
    n_queries: int = 0
    mean: float = 0.0
    mean_low: float | None = None  # bootstrap interval (report half only)
    mean_high: float | None = None
    baseline_mean: float = 0.0  # similarity only, same correlation and queries
    diff: float = 0.0  # mean(system - similarity) over the same queries: the gain
    diff_low: float | None = None
    diff_high: float | None = None
    confidence: float = 0.95
    n_resamples: int = 0


@dataclass(kw_only=True)
class CredibilityWeightRecord(Record):
    """A source type's weight after a tune-half query, in the system that learns from feedback."""

    TABLE: ClassVar[str] = "credibility_weights"
    stage: str = STAGE
    experiment_id: str = ""
    correlation: float = 0.0
    strength: float = 0.0
    system: str = ""
    step: int = 0  # 0: the initial priors; t: after the t-th tune-half query
    source_type: str = ""
    weight: float = 0.0


EXPERIMENT_RECORD_TYPES: tuple[type[Record], ...] = (
    CredibilityDocRecord,
    CredibilityRateRecord,
    CredibilityQueryRecord,
    CredibilitySummaryRecord,
    CredibilityWeightRecord,
)

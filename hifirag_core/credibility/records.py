"""Warehouse tables of the credibility experiment, registered so the writer can persist them.

Every row carries ``experiment_id`` (a hash of the experiment config and the corpus), so runs
with different settings stay apart in SQL. Rows computed with the oracle weight update say so in
``oracle_feedback``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from hifirag_core.records import Record, register_record_type

STAGE = "credibility_experiment"


@dataclass(kw_only=True)
class CredibilityDocRecord(Record):
    """One document of the experiment corpus (originals and synthetic copies)."""

    TABLE: ClassVar[str] = "credibility_corpus"
    stage: str = STAGE
    experiment_id: str = ""
    namespace: str = ""
    doc_id: str = ""
    url: str = ""
    title: str = ""
    source_type: str = ""
    kind: str = ""  # original | faithful | adversarial
    origin_doc_id: str = ""
    origin_qid: str | None = None
    focus: str = ""
    changes: list[str] = field(default_factory=list)  # what an adversarial copy made false
    n_chars: int = 0


@dataclass(kw_only=True)
class CredibilityQueryRecord(Record):
    """One query's top k under one system and one label scheme, with its metrics."""

    TABLE: ClassVar[str] = "credibility_query_results"
    stage: str = STAGE
    experiment_id: str = ""
    system: str = ""
    labels: str = ""  # topical | government_only
    oracle_feedback: bool = False
    step: int = 0  # position of the query in the processing order (matters for the update)
    query: str = ""
    qtype: str = ""
    k: int = 5
    precision: float = 0.0
    ndcg: float = 0.0
    reciprocal_rank: float = 0.0
    adversarial_hit_rate: float = 0.0
    mean_credibility: float = 0.0
    high_credibility_ratio: float = 0.0
    n_relevant: int = 0
    top_doc_ids: list[str] = field(default_factory=list)
    top_source_types: list[str] = field(default_factory=list)
    top_similarities: list[float] = field(default_factory=list)
    top_weights: list[float] = field(default_factory=list)


@dataclass(kw_only=True)
class CredibilitySummaryRecord(Record):
    """A system's mean metric over the queries, its interval, and its paired difference to the baseline."""

    TABLE: ClassVar[str] = "credibility_summary"
    stage: str = STAGE
    experiment_id: str = ""
    system: str = ""
    labels: str = ""
    oracle_feedback: bool = False
    metric: str = ""
    k: int = 5
    n_queries: int = 0
    mean: float = 0.0
    mean_low: float = 0.0
    mean_high: float = 0.0
    baseline_system: str = ""
    baseline_mean: float | None = None
    diff: float | None = None  # mean(system - baseline) over the same queries
    diff_low: float | None = None
    diff_high: float | None = None
    confidence: float = 0.95
    n_resamples: int = 0


@dataclass(kw_only=True)
class CredibilitySweepRecord(Record):
    """A metric of the prior system with the priors' spread scaled by ``scale``."""

    TABLE: ClassVar[str] = "credibility_sensitivity"
    stage: str = STAGE
    experiment_id: str = ""
    labels: str = ""
    scale: float = 1.0
    metric: str = ""
    value: float = 0.0
    priors_json: str = "{}"


@dataclass(kw_only=True)
class CredibilityWeightRecord(Record):
    """A source type's weight after a query, in a system with the ORACLE post-query update."""

    TABLE: ClassVar[str] = "credibility_weights"
    stage: str = STAGE
    experiment_id: str = ""
    system: str = ""
    oracle_feedback: bool = True
    step: int = 0  # 0: the initial priors; t: after the t-th query
    source_type: str = ""
    weight: float = 0.0


EXPERIMENT_RECORD_TYPES: tuple[type[Record], ...] = (
    CredibilityDocRecord,
    CredibilityQueryRecord,
    CredibilitySummaryRecord,
    CredibilitySweepRecord,
    CredibilityWeightRecord,
)
for _cls in EXPERIMENT_RECORD_TYPES:
    register_record_type(_cls)

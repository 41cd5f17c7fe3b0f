"""Warehouse tables of the evaluation.

An evaluation has its own id, used as the partition (``run_id``) of its rows in ``scores``,
``evaluations`` and ``evaluation_metrics``; ``evaluations.scored_run_id`` names the answer run each
variant's scores belong to (the ``evaluation_scores`` view joins them). Keeping scores under the
evaluation keeps them comparable later even when the answer run they scored is recomputed under
the same run id after a code change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from hifirag_core.records import Record, utcnow

STAGE = "evaluate"
# verdicts that make an evaluation a baseline for later ones ("regressed" never does)
BASELINE_VERDICTS = ("passed", "accepted", "first")


@dataclass(kw_only=True)
class EvaluationRecord(Record):
    """One variant of one evaluation: which run it scored, on what, and the gate's verdict."""

    TABLE: ClassVar[str] = "evaluations"
    stage: str = STAGE
    variant: str = ""
    scored_run_id: str = ""
    dataset: str = ""
    dataset_fingerprint: str = ""
    config_hash: str | None = None  # the scored run's configuration
    overrides_json: str | None = None
    eval_config_json: str = "{}"
    semantic_metric: str | None = None  # bertscore_deberta_f1 or bertscore_minilm_f1 (never both)
    n_questions: int = 0
    n_answered: int = 0
    n_unscorable: int = 0  # reference is null: reported, never scored
    verdict: str = ""  # first | passed | regressed | accepted
    regressed_metrics: list[str] = field(default_factory=list)
    baseline_evaluation_id: str | None = None
    baseline_run_id: str | None = None
    report_path: str | None = None
    started_at: datetime = field(default_factory=utcnow)
    finished_at: datetime | None = None


@dataclass(kw_only=True)
class EvaluationMetricRecord(Record):
    """A metric of a variant: mean with its interval, and its paired difference to the baseline."""

    TABLE: ClassVar[str] = "evaluation_metrics"
    stage: str = STAGE
    variant: str = ""
    metric: str = ""
    n: int = 0  # questions with a value
    n_missing: int = 0  # unscorable or undefined for this metric
    mean: float | None = None
    low: float | None = None
    high: float | None = None
    gated: bool = False
    not_gated_reason: str | None = None  # a gated metric this variant passes by construction: reported only
    baseline_evaluation_id: str | None = None
    n_paired: int | None = None
    baseline_mean: float | None = None
    diff: float | None = None
    diff_low: float | None = None
    diff_high: float | None = None
    regressed: bool | None = None


EVALUATION_RECORD_TYPES: tuple[type[Record], ...] = (EvaluationRecord, EvaluationMetricRecord)

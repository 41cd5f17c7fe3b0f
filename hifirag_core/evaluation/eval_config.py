"""Evaluation settings, typed and built once at the entry point (``hifirag eval --eval-set key=value``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hifirag_core.config import ConfigError, parse_overrides
from hifirag_core.metrics.bootstrap import DEFAULT_RESAMPLES, DEFAULT_SEED
from hifirag_core.metrics.semantic import DEBERTA_LAYER

# Citation support threshold (MiniLM cosine between an answer sentence and a source sentence).
# Calibrated with tools/calibrate_citation_support.py on the 220 FAQ questions: each gold-answer
# sentence of three or more words (1,244) against (positive) its own gold section with that very
# sentence removed, so support has to come from the rest of the section as it would for a
# paraphrase, and (negatives, 44,845) the gold sections of the other questions on the same FAQ page
# and of the five questions worded most alike elsewhere. ROC AUC 0.919; 0.42 maximises balanced
# accuracy (Youden's J): true-positive rate 0.866, false-positive rate 0.157 (at 0.50: 0.736 and
# 0.079). A sentence copied verbatim scores 1.0, so extractive answers are supported wherever they
# copied from.
CITATION_SUPPORT_THRESHOLD = 0.42


class EvaluationConfig(BaseModel):
    """How answers are scored and compared."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A local folder holding microsoft/deberta-xlarge-mnli: with it, BERTScore is the organisers'
    # DeBERTaScore; without it, MiniLM BERTScore under its own metric name. Never downloaded.
    deberta_path: str | None = None
    deberta_layer: int = DEBERTA_LAYER
    bertscore: bool = True  # False: skip the semantic metric (and its echo floor) entirely
    bertscore_batch_size: int = Field(default=32, ge=1)
    citation_support_threshold: float = Field(default=CITATION_SUPPORT_THRESHOLD, ge=-1.0, le=1.0)
    bootstrap_resamples: int = Field(default=DEFAULT_RESAMPLES, ge=100)
    bootstrap_seed: int = DEFAULT_SEED
    confidence: float = Field(default=0.95, gt=0.0, lt=1.0)
    # Metrics whose paired difference to the baseline gates the evaluation (higher is better for
    # all); a metric a run does not have is skipped. Length, cost and latency are reported, not gated.
    gated_metrics: tuple[str, ...] = ("rouge_l_f1", "bertscore_deberta_f1", "bertscore_minilm_f1",
                                      "citation_precision", "citation_recall", "gold_section_cited",
                                      "gold_sections_all_cited", "abstention_precision", "abstention_recall",
                                      "answered_and_cited")
    changed_questions: int = Field(default=10, ge=0)  # rows in the report's "changed most" table


def build_evaluation_config(pairs: list[str] | tuple[str, ...] = (), **values: Any) -> EvaluationConfig:
    """Defaults, then ``values``, then ``key=value`` pairs; validated once."""
    data = {**values, **parse_overrides(list(pairs))}
    try:
        return EvaluationConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid evaluation setting: {problems}") from None

"""Summaries with bootstrap intervals, paired differences, and the regression gate.

A metric regressed when the percentile interval of its paired difference (this evaluation minus
the baseline, over the questions both scored) lies entirely below zero. Only gated metrics (the
quality metrics, all higher-is-better) can fail an evaluation; length, cost and latency are
compared and shown, never gated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from hifirag_core.config import PipelineConfig
from hifirag_core.evaluation.eval_config import EvaluationConfig
from hifirag_core.metrics.bootstrap import bootstrap_ci, paired_bootstrap_ci
from hifirag_core.records import ScoreRecord
from hifirag_core.records.evaluation import EvaluationMetricRecord

# metric -> question -> value (None: unscorable or undefined)
MetricValues = dict[str, dict[str, float | None]]


def by_metric(records: Iterable[ScoreRecord]) -> MetricValues:
    """Score rows as metric -> question -> value."""
    out: MetricValues = defaultdict(dict)
    for r in records:
        out[r.metric][r.question_id] = r.value
    return dict(out)


@dataclass(frozen=True)
class Verdict:
    """The gate's outcome for one variant."""

    verdict: str  # first | passed | regressed
    regressed_metrics: tuple[str, ...]


def true_by_construction(pipeline: PipelineConfig, cfg: EvaluationConfig) -> dict[str, str]:
    """Metrics a run with this configuration passes by how it is built, each with the reason.

    Such a metric measures nothing about the variant (it would pass whatever the evidence), so it is
    reported and never gated.
    """
    out: dict[str, str] = {}
    if pipeline.backends.writer_llm == "offline":
        why = ("the offline writer copies its sentences from the sources and marks each with the source it "
               "came from, so each sentence is supported by its citation by construction")
        out["citation_precision"] = out["citation_recall"] = why
    elif (pipeline.citations.enabled and pipeline.backends.filter_llm == "offline"
          and pipeline.citations.support_threshold >= cfg.citation_support_threshold):
        out["citation_precision"] = (
            f"the offline citation check cites a source only where its MiniLM support reaches "
            f"{pipeline.citations.support_threshold} (the metric's threshold is {cfg.citation_support_threshold}), "
            "so its citations are supported by construction")
    return out


def summarize(values: MetricValues, variant: str, cfg: EvaluationConfig,
              ungated: Mapping[str, str] | None = None) -> list[EvaluationMetricRecord]:
    """Each metric's mean over the questions that have it, with its bootstrap interval.

    ``ungated`` names metrics that are reported but not gated, with the reason (see
    :func:`true_by_construction`).
    """
    ungated = ungated or {}
    out = []
    for metric in sorted(values):
        present = [v for v in values[metric].values() if v is not None]
        rec = EvaluationMetricRecord(variant=variant, metric=metric, n=len(present),
                                     n_missing=len(values[metric]) - len(present),
                                     gated=metric in cfg.gated_metrics and metric not in ungated,
                                     not_gated_reason=ungated.get(metric) if metric in cfg.gated_metrics else None)
        if present:
            ci = bootstrap_ci(present, n_resamples=cfg.bootstrap_resamples, confidence=cfg.confidence,
                              seed=cfg.bootstrap_seed)
            rec.mean, rec.low, rec.high = ci.mean, ci.low, ci.high
        out.append(rec)
    return out


def paired(current: Mapping[str, float | None], baseline: Mapping[str, float | None]) -> tuple[list[str], list[float],
                                                                                            list[float]]:
    """The questions both have a value for, in a fixed order, with both values."""
    ids = sorted(q for q, v in current.items() if v is not None and baseline.get(q) is not None)
    return ids, [float(current[q]) for q in ids], [float(baseline[q]) for q in ids]  # type: ignore[arg-type]


def compare(summary: Sequence[EvaluationMetricRecord], current: MetricValues, baseline: MetricValues,
            baseline_evaluation_id: str, cfg: EvaluationConfig) -> Verdict:
    """Fill each metric's paired difference to the baseline into ``summary``; say whether any gated one regressed."""
    regressed = []
    for rec in summary:
        if rec.metric not in baseline or rec.metric.startswith("echo_"):
            continue
        ids, now, before = paired(current.get(rec.metric, {}), baseline[rec.metric])
        rec.baseline_evaluation_id, rec.n_paired = baseline_evaluation_id, len(ids)
        if not ids:
            continue
        ci = paired_bootstrap_ci(now, before, n_resamples=cfg.bootstrap_resamples, confidence=cfg.confidence,
                                 seed=cfg.bootstrap_seed)
        rec.baseline_mean, rec.diff, rec.diff_low, rec.diff_high = ci.mean_baseline, ci.mean_diff, ci.low, ci.high
        if rec.gated:
            rec.regressed = ci.high < 0
            if rec.regressed:
                regressed.append(rec.metric)
    return Verdict("regressed" if regressed else "passed", tuple(regressed))


def changed_most(current: Mapping[str, float | None], other: Mapping[str, float | None],
                 n: int) -> list[tuple[str, float, float]]:
    """The ``n`` questions whose value moved most between two runs: (question, other, current)."""
    ids, now, before = paired(current, other)
    moved = sorted(zip(ids, before, now, strict=True), key=lambda t: (-abs(t[2] - t[1]), t[0]))
    return [(q, b, c) for q, b, c in moved[:n] if b != c]

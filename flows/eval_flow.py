"""The evaluate flow: answer (or reuse) each variant, score every question, gate, report.

    plan ─► answer each variant (one run per variant; cached stages cost nothing)
         ─► score each run ─► compare with the last passing evaluation of the same data ─► write
         ─► Markdown artifact + HTML report ─► final state: Failed when a gated metric regressed

The steps live in ``hifirag_core.evaluation``; this file only orders them.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from flows.answer import run_plans
from flows.runners import Runner, RunnerChoice
from hifirag_core.corpus.build import ensure_corpus
from hifirag_core.evaluation.answer_scoring import computed_seconds
from hifirag_core.evaluation.eval_config import build_evaluation_config
from hifirag_core.evaluation.eval_report import VariantResult
from hifirag_core.evaluation.eval_steps import (
    EvaluationPlan,
    RegressionDetected,
    ScoredVariant,
    Scorer,
    build_report,
    evaluation_records,
    gate_variant,
    outcome,
    plan_evaluation,
    regression_message,
    score_variant,
    write_evaluation,
    write_report,
)
from hifirag_core.records import utcnow
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.store.warehouse import Warehouse


@task(name="score_run", task_run_name="score-{variant}", cache_policy=NO_CACHE, persist_result=False)
def score_run(plan: EvaluationPlan, variant: str, run_id: str, scorer: Scorer,
              known_seconds: dict[str, float]) -> ScoredVariant:
    """Score every question of one variant's run."""
    return score_variant(Warehouse(plan.data_root), plan, variant, run_id, scorer, known_seconds)


@task(name="compare_with_baseline", task_run_name="compare-{scored.variant}", cache_policy=NO_CACHE,
      persist_result=False)
def compare_with_baseline(plan: EvaluationPlan, scored: ScoredVariant) -> VariantResult:
    """Paired differences to the last passing evaluation of the same data and variant, and the verdict."""
    return gate_variant(Warehouse(plan.data_root), plan, scored)


@flow(name="evaluate", log_prints=False)
def evaluate(
    dataset: str,
    variants: list[str] | None = None,
    limit: int | None = None,
    sample: int | None = None,
    ids: list[str] | None = None,
    overrides: list[str] | None = None,
    eval_settings: list[str] | None = None,
    data_root: str | None = None,
    fields: dict[str, str] | None = None,
    baseline: str | None = None,
    accept: bool = False,
    report_dir: str | None = None,
    runner: Runner = "threads",
    dask_address: str | None = None,
    dask_workers: int = 2,
    profile: str | None = None,
    config_file: str | None = None,
):
    """Evaluate variants on a dataset (``mmu``, ``faq-a``, ``faq-b`` or a JSONL path).

    ``profile`` and ``config_file`` as for ``answer-questions`` (the same for every variant).

    ``overrides`` are pipeline ``key=value`` settings (they apply to every variant); ``eval_settings``
    are ``EvaluationConfig`` fields (``deberta_path=/models/deberta-xlarge-mnli``). ``baseline`` names
    the evaluation to compare with (default: the last passing one of the same dataset fingerprint and
    variant); ``accept`` records a regression as accepted so it becomes the next baseline. Returns the
    outcome dict; when a gated metric regressed (and ``accept`` is off), the flow ends Failed.
    """
    root = resolve_data_root(data_root)
    cfg = build_evaluation_config(eval_settings or [])
    plan = plan_evaluation(dataset, variants or ["final"], cfg=cfg, root=root, limit=limit, sample=sample, ids=ids,
                           overrides=overrides or [], fields=fields, baseline=baseline, accept=accept,
                           profile=profile, config_file=config_file)
    for run in plan.runs:
        ensure_corpus(run.cfg, run.data_root, get_run_logger().info)
    return run_evaluation(plan, RunnerChoice(runner, dask_address, dask_workers), report_dir)


@flow(name="evaluate-plan", log_prints=False, validate_parameters=False)
def evaluate_plan(plan: EvaluationPlan, report_dir: str | None = None, runner: Runner = "threads",
                  dask_address: str | None = None, dask_workers: int = 2):
    """An evaluation planned, checked and given its corpus by the command line (``hifirag eval``)."""
    return run_evaluation(plan, RunnerChoice(runner, dask_address, dask_workers), report_dir)


def run_evaluation(plan: EvaluationPlan, choice: RunnerChoice, report_dir: str | None):
    """The body of both flows: answer, score, gate, report."""
    log = get_run_logger()
    started = utcnow()
    root = plan.data_root
    log.info(f"Evaluation {plan.evaluation_id}: {plan.dataset.note}; {len(plan.queries)} questions; "
             f"variants {', '.join(plan.variants)}")
    # A rerun replaces a run's stage rows with cache hits; keep the times of the stages as computed.
    known_seconds = computed_seconds(Warehouse(root))
    runs = [summary.to_dict() for summary in run_plans(list(plan.runs), choice)]
    scorer = Scorer(plan.cfg, root)
    scored = [score_run(plan, variant, run["run_id"], scorer, known_seconds)
              for variant, run in zip(plan.variants, runs, strict=True)]
    results = [compare_with_baseline(plan, s) for s in scored]
    report = build_report(plan, results, scorer.spec.label if scorer.spec else None)
    out_dir = Path(report_dir) if report_dir else root / "reports" / "evaluations"
    md_path, html_path = write_report(report, out_dir)
    warehouse = Warehouse(root)
    write_evaluation(warehouse, plan, evaluation_records(plan, scored, results, started, html_path))
    result = outcome(plan, results, md_path, html_path, runs)
    create_markdown_artifact(markdown=result["markdown"], key=f"evaluation-{plan.dataset.slug}"[:100],
                             description=f"Evaluation {plan.evaluation_id}")
    log.info(f"Report: {html_path}")
    if result["regressed"]:
        message = regression_message(result)
        log.error(message)
        return Failed(message=message, data=RegressionDetected(message, result))
    return result

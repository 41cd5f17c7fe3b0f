"""The steps of an evaluation as plain functions; ``flows/eval_flow.py`` orders them as Prefect tasks.

    plan_evaluation -> (answer each variant: the answer flow) -> score_variant -> gate_variant
        -> write_evaluation -> write_report

Nothing here imports Prefect. Records come back to the caller, who writes them through the
warehouse's one writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from hifirag_core.config import ConfigError, PipelineConfig
from hifirag_core.evaluation.answer_scoring import (
    AnsweredQuestion,
    echo_scores,
    embedding_similarity,
    load_answers,
    load_costs,
    load_known_item,
    load_latencies,
    load_source_texts,
    score_questions,
    stage_seconds,
)
from hifirag_core.evaluation.compare import (
    MetricValues,
    Verdict,
    by_metric,
    compare,
    summarize,
    true_by_construction,
)
from hifirag_core.evaluation.datasets import EvalDataset, resolve_dataset
from hifirag_core.evaluation.eval_config import EvaluationConfig
from hifirag_core.evaluation.eval_report import (
    FUNNEL_STEPS,
    EvaluationReport,
    StageCost,
    VariantResult,
    markdown,
    to_html,
)
from hifirag_core.evaluation.two_part import gold_sections_found
from hifirag_core.hashing import stable_hash
from hifirag_core.metrics.semantic import BertScoreSpec, select_bertscore
from hifirag_core.pipeline.plan import RunPlan, plan_run
from hifirag_core.pipeline.specs import STAGE_NAMES
from hifirag_core.pipeline.variants import variant_overrides
from hifirag_core.records import ScoreRecord, utcnow
from hifirag_core.records.evaluation import BASELINE_VERDICTS, EvaluationMetricRecord, EvaluationRecord
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.store.warehouse import Warehouse, WarehouseError, check_run_id


class RegressionDetected(Exception):
    """An evaluation in which a gated metric regressed; ``outcome`` is the evaluation's summary."""

    def __init__(self, message: str, outcome: dict):
        super().__init__(message, outcome)
        self.message = message
        self.outcome = outcome

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class EvaluationPlan:
    """What to evaluate, validated before any run starts."""

    evaluation_id: str
    dataset: EvalDataset
    dataset_fingerprint: str
    variants: tuple[str, ...]
    overrides: tuple[str, ...]  # the protocol's, then the user's
    user_overrides: tuple[str, ...]
    limit: int | None
    sample: int | None
    ids: tuple[str, ...] | None
    data_root: Path
    cfg: EvaluationConfig
    baseline: str | None = None  # an explicit baseline evaluation id
    accept: bool = False  # record a regression as accepted: it becomes the baseline
    queries: dict[str, str] = field(default_factory=dict)
    runs: tuple[RunPlan, ...] = ()  # one planned run per variant, in ``variants`` order


def plan_evaluation(dataset: str, variants: Sequence[str], *, cfg: EvaluationConfig, root: Path,
                    limit: int | None = None, sample: int | None = None, ids: Sequence[str] | None = None,
                    overrides: Sequence[str] = (), fields: dict[str, str] | None = None,
                    baseline: str | None = None, accept: bool = False, now: datetime | None = None,
                    profile: str | None = None, config_file: str | Path | None = None) -> EvaluationPlan:
    """Resolve the dataset, check every variant and the questions, and name the evaluation (every variant
    with the same profile and config file: ``hifirag_core.profiles``)."""
    ds = resolve_dataset(dataset, fields, root)
    if not ds.path.exists():
        where = "" if ds.name.startswith("custom:") else " (the shared data: ../shared/data, or set HIFIRAG_SHARED_DATA)"
        raise ConfigError(f"dataset {dataset!r}: no file {ds.path}{where}; datasets are mmu, faq-a, faq-b or a JSONL path")
    names = tuple(dict.fromkeys(v.strip() for v in variants if v.strip()))
    if not names:
        raise ConfigError("no variant to evaluate: pass --variants final,rag,...")
    for name in names:
        variant_overrides(name)
    if limit is None and sample is None and not ids:
        limit = ds.default_limit
    all_overrides = (*ds.overrides, *overrides)
    plans = [plan_run(ds.path, variant=v, overrides=all_overrides, limit=limit, sample=sample, ids=ids, root=root,
                      fields=ds.fields, profile=profile, config_file=config_file) for v in names]
    fingerprints = {p.questions.fingerprint for p in plans}
    if len(fingerprints) != 1:  # a variant with other few-shot examples drops other questions
        raise ConfigError("the variants do not answer the same questions (their few-shot example sets differ); "
                          "evaluate them separately")
    questions = plans[0].questions
    fingerprint = ds.fingerprint(questions)
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%S")
    key = stable_hash([fingerprint, names, list(overrides), cfg.model_dump(mode="json"),
                       *([plans[0].cfg.fingerprint()] if profile or config_file else [])], 6)
    evaluation_id = check_run_id(f"eval-{ds.slug}-{stamp}-{key}"[:128])
    if baseline is not None:
        _require_evaluation(Warehouse(root), baseline)
    return EvaluationPlan(evaluation_id, ds, fingerprint, names, tuple(all_overrides), tuple(overrides), limit, sample,
                          tuple(ids) if ids else None, Path(root), cfg, baseline, accept,
                          {q.id: q.query for q in questions.questions}, tuple(plans))


def _require_evaluation(warehouse: Warehouse, evaluation_id: str) -> None:
    rows = warehouse.query("SELECT count(*) FROM evaluations WHERE run_id = ?", [check_run_id(evaluation_id)]).rows
    if not rows or not rows[0][0]:
        raise WarehouseError(f"--baseline: no evaluation {evaluation_id!r} (see `hifirag sql \"SELECT DISTINCT run_id, "
                             "dataset, variant, verdict FROM evaluations\"`)")


@dataclass
class ScoredVariant:
    """A variant's score rows and summary before the gate."""

    variant: str
    run_id: str
    records: list[ScoreRecord]
    values: MetricValues
    summary: list[EvaluationMetricRecord]
    n_questions: int
    n_answered: int
    unscorable: list[str]
    config_hash: str | None
    stages: list[StageCost]
    funnel: dict[str, float] | None


class Scorer:
    """The models scoring needs, loaded once per evaluation, and the echo floor computed once."""

    def __init__(self, cfg: EvaluationConfig, data_root: Path):
        self.cfg = cfg
        self.spec: BertScoreSpec | None = select_bertscore(cfg.deberta_path, deberta_layer=cfg.deberta_layer) \
            if cfg.bertscore else None
        self.embedder = Embedder(Path(data_root) / "cache" / "vectors.sqlite")
        self._echo: dict[str, dict[str, float]] = {}

    def echo(self, questions: list[AnsweredQuestion]) -> dict[str, dict[str, float]]:
        missing = [q for q in questions if q.scorable and q.question_id not in self._echo]
        if missing:
            self._echo.update(echo_scores(missing, self.spec, self.cfg.bertscore_batch_size))
        return self._echo


def score_variant(warehouse: Warehouse, plan: EvaluationPlan, variant: str, run_id: str,
                  scorer: Scorer, known_seconds: dict[str, float] | None = None) -> ScoredVariant:
    """Every question of the variant's run scored, and each metric summarized with its interval."""
    questions = load_answers(warehouse, run_id)
    if not questions:
        raise WarehouseError(f"run {run_id!r} has no questions in {warehouse.root}")
    known = plan.dataset.known_item
    has_gold = any(q.has_gold for q in questions)
    known_item = load_known_item(warehouse, run_id) if (known or (known is None and has_gold)) else None
    scored = score_questions(
        questions, variant=variant, dataset=plan.dataset.name, spec=scorer.spec,
        similarity=embedding_similarity(scorer.embedder.encode), support_threshold=scorer.cfg.citation_support_threshold,
        source_texts=load_source_texts(warehouse, run_id), known_item=known_item, costs=load_costs(warehouse, run_id),
        latencies=load_latencies(warehouse, run_id, known_seconds), echo=scorer.echo(questions),
        batch_size=scorer.cfg.bertscore_batch_size,
        gold_sections=gold_sections_found(warehouse, run_id) if known_item is not None else None)
    if lost := sorted(d.line(warehouse.root) for d in warehouse.skipped.values() if d.run_id == run_id):
        # a score over rows a damaged file held back would read as the run's (and pass or fail its gate)
        raise WarehouseError(f"run {run_id!r} is not scored: reading it skipped {len(lost)} damaged file(s): "
                             + " ".join(lost))
    values = by_metric(scored.records)
    config_rows = warehouse.query("SELECT config_hash, config_json FROM runs WHERE run_id = ?", [run_id]).rows
    pipeline = _run_config(config_rows[0][1]) if config_rows else None
    ungated = true_by_construction(pipeline, plan.cfg) if pipeline is not None else {}
    return ScoredVariant(variant, run_id, scored.records, values, summarize(values, variant, plan.cfg, ungated),
                         len(questions), scored.n_answered, scored.unscorable,
                         config_rows[0][0] if config_rows else None,
                         stage_costs(warehouse, run_id, len(questions), known_seconds),
                         funnel(warehouse, run_id) if has_gold else None)


def _run_config(config_json: str | None) -> PipelineConfig | None:
    """A run's stored configuration; None when it no longer reads (then every gated metric is gated)."""
    try:
        return PipelineConfig.model_validate_json(config_json) if config_json else None
    except ValueError:
        return None


def stage_costs(warehouse: Warehouse, run_id: str, n_questions: int,
                known_seconds: dict[str, float] | None = None) -> list[StageCost]:
    """Per stage: seconds per question when computed (cache hits count with their computing run's time),
    the share computed by this run, and the model calls' cost and tokens per question."""
    per_stage: dict[str, list[tuple[bool, float | None]]] = {}
    for _, stage, cached, _, seconds in stage_seconds(warehouse, run_id, known_seconds):
        per_stage.setdefault(stage, []).append((cached, seconds))
    timing = []
    for stage, items in per_stage.items():
        known = [sec for _, sec in items if sec is not None]
        timing.append((stage, sum(known) / len(known) if known else None,
                       sum(1 for cached, _ in items if not cached) / len(items)))
    calls = {stage: (float(cost or 0), int(tokens or 0)) for stage, cost, tokens in warehouse.query(
        """SELECT stage, sum(cost_usd), sum(coalesce(tokens_in, 0) + coalesce(tokens_out, 0)
                                            + coalesce(tokens_thinking, 0))
           FROM llm_calls WHERE run_id = ? GROUP BY stage""", [run_id]).rows}
    n = max(1, n_questions)
    order = {s: i for i, s in enumerate(STAGE_NAMES)}
    out = [StageCost(stage, float(sec) if sec is not None else None, float(share or 0.0),
                     calls.get(stage, (0.0, 0))[0] / n, calls.get(stage, (0.0, 0))[1] // n)
           for stage, sec, share in timing]
    return sorted(out, key=lambda s: order.get(s.stage, len(order)))


def funnel(warehouse: Warehouse, run_id: str) -> dict[str, float] | None:
    """The run's evidence funnel shares, when its questions know where their answer lives."""
    result = warehouse.query(f"SELECT {', '.join(FUNNEL_STEPS)} FROM evidence_funnel_summary WHERE run_id = ?",
                             [run_id])
    if not result.rows:
        return None
    return {step: float(v or 0.0) for step, v in zip(result.columns, result.rows[0], strict=True)}


def find_baseline(warehouse: Warehouse, plan: EvaluationPlan, variant: str) -> tuple[str, str] | None:
    """(evaluation id, scored run id) to compare with: the explicit one, else the last evaluation of the same
    dataset fingerprint and variant that was not left regressed."""
    if plan.baseline is not None:
        rows = warehouse.query("SELECT run_id, scored_run_id FROM evaluations WHERE run_id = ? AND variant = ?",
                               [plan.baseline, variant]).rows
        return (rows[0][0], rows[0][1]) if rows else None
    marks = ", ".join("?" * len(BASELINE_VERDICTS))
    rows = warehouse.query(
        f"""SELECT run_id, scored_run_id FROM evaluations
            WHERE dataset_fingerprint = ? AND variant = ? AND run_id <> ? AND verdict IN ({marks})
            ORDER BY finished_at DESC LIMIT 1""",
        [plan.dataset_fingerprint, variant, plan.evaluation_id, *BASELINE_VERDICTS]).rows
    return (rows[0][0], rows[0][1]) if rows else None


def baseline_values(warehouse: Warehouse, evaluation_id: str, variant: str) -> MetricValues:
    """A stored evaluation's per-question values for one variant."""
    rows = warehouse.query("SELECT metric, question_id, value FROM scores WHERE run_id = ? AND variant = ?",
                           [evaluation_id, variant]).rows
    out: MetricValues = {}
    for metric, qid, value in rows:
        out.setdefault(metric, {})[qid] = value
    return out


def gate_variant(warehouse: Warehouse, plan: EvaluationPlan, scored: ScoredVariant) -> VariantResult:
    """Compare with the baseline evaluation (if any) and give the variant its verdict."""
    found = find_baseline(warehouse, plan, scored.variant)
    result = VariantResult(scored.variant, scored.run_id, scored.summary, scored.values, scored.n_questions,
                           scored.n_answered, scored.unscorable, Verdict("first", ()), stages=scored.stages,
                           funnel=scored.funnel)
    if found is None:
        return result
    result.baseline_evaluation_id, result.baseline_run_id = found
    result.baseline_values = baseline_values(warehouse, found[0], scored.variant)
    result.verdict = compare(scored.summary, scored.values, result.baseline_values, found[0], plan.cfg)
    if result.verdict.verdict == "regressed" and plan.accept:
        result.verdict = Verdict("accepted", result.verdict.regressed_metrics)
    return result


def evaluation_records(plan: EvaluationPlan, scored: Sequence[ScoredVariant], results: Sequence[VariantResult],
                       started: datetime, report_path: Path | None) -> dict[str, list]:
    """The rows of ``scores``, ``evaluations`` and ``evaluation_metrics`` for the whole evaluation."""
    spec = None
    for s in scored:
        spec = next((r.metric for r in s.records if r.metric.startswith("bertscore_")), spec)
    finished = utcnow()
    evaluations = [
        EvaluationRecord(
            variant=r.variant, scored_run_id=r.run_id, dataset=plan.dataset.name,
            dataset_fingerprint=plan.dataset_fingerprint, config_hash=s.config_hash,
            overrides_json=json.dumps(list(plan.user_overrides)) if plan.user_overrides else None,
            eval_config_json=plan.cfg.model_dump_json(), semantic_metric=spec, n_questions=r.n_questions,
            n_answered=r.n_answered, n_unscorable=len(r.unscorable), verdict=r.verdict.verdict,
            regressed_metrics=list(r.verdict.regressed_metrics), baseline_evaluation_id=r.baseline_evaluation_id,
            baseline_run_id=r.baseline_run_id, report_path=str(report_path) if report_path else None,
            started_at=started, finished_at=finished)
        for s, r in zip(scored, results, strict=True)
    ]
    return {"scores": [rec for s in scored for rec in s.records],
            "evaluations": evaluations,
            "evaluation_metrics": [m for r in results for m in r.summary]}


def write_evaluation(warehouse: Warehouse, plan: EvaluationPlan, records: dict[str, list]) -> None:
    """Every table of the evaluation under its id, in one write each, then the DuckDB file."""
    for table, rows in records.items():
        for stage in sorted({r.stage for r in rows}) or ["evaluate"]:  # scores are rows of stage "score"
            warehouse.write(table, [r for r in rows if r.stage == stage], run_id=plan.evaluation_id, stage=stage)
    warehouse.refresh_duckdb_file()


def build_report(plan: EvaluationPlan, results: Sequence[VariantResult], semantic_label: str | None) -> EvaluationReport:
    """The report's content."""
    return EvaluationReport(plan.evaluation_id, plan.dataset.name, plan.dataset.note, plan.dataset_fingerprint,
                            semantic_label, plan.cfg.citation_support_threshold, plan.cfg.confidence, list(results),
                            plan.queries, utcnow(), plan.cfg.changed_questions)


def write_report(report: EvaluationReport, out_dir: Path) -> tuple[Path, Path]:
    """The Markdown summary and the self-contained HTML page, under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md_path = out_dir / f"{report.evaluation_id}.md"
    html_path = out_dir / f"{report.evaluation_id}.html"
    md_path.write_text(markdown(report), encoding="utf-8")
    html_path.write_text(to_html(report), encoding="utf-8")
    return md_path, html_path


def outcome(plan: EvaluationPlan, results: Sequence[VariantResult], md_path: Path, html_path: Path,
            runs: Sequence[dict]) -> dict:
    """What the flow returns (and what the CLI prints from)."""
    regressed = {r.variant: list(r.verdict.regressed_metrics) for r in results if r.verdict.verdict == "regressed"}
    return {
        "evaluation_id": plan.evaluation_id, "dataset": plan.dataset.name,
        "dataset_fingerprint": plan.dataset_fingerprint, "variants": list(plan.variants),
        "runs": {r.variant: r.run_id for r in results},
        "verdicts": {r.variant: r.verdict.verdict for r in results}, "regressed": regressed,
        "baselines": {r.variant: r.baseline_evaluation_id for r in results},
        "markdown_path": str(md_path), "html_path": str(html_path), "markdown": md_path.read_text(encoding="utf-8"),
        "run_summaries": list(runs),
    }


def regression_message(result: dict) -> str:
    """One line naming what regressed, for the flow's final state and the CLI."""
    parts = [f"{variant}: {', '.join(metrics)}" for variant, metrics in result["regressed"].items()]
    return f"evaluation {result['evaluation_id']} regressed against its baseline ({'; '.join(parts)})"

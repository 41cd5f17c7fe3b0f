"""Run planning and bookkeeping: which questions, which config, which run id, and the runs table."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hifirag_core.config import DEFAULT_DATA_ROOT, PipelineConfig, build_config, parse_overrides
from hifirag_core.corpus.sources import gold_location
from hifirag_core.examples import ExampleSet, resolve_example_set
from hifirag_core.hashing import stable_hash
from hifirag_core.questions import Question, QuestionSet, load_questions, select_questions
from hifirag_core.records import QuestionRecord, RunRecord, utcnow
from hifirag_core.reuse import ReuseSpec
from hifirag_core.runtime import RunContext, uses_real_backends
from hifirag_core.variants import variant_overrides
from hifirag_core.warehouse import Warehouse, WarehouseError, check_run_id


def data_root(explicit: str | Path | None = None) -> Path:
    """The flag, else ``$HIFIRAG_DATA_ROOT``, else ``warehouse/data`` in the project."""
    return Path(explicit or os.environ.get("HIFIRAG_DATA_ROOT") or DEFAULT_DATA_ROOT).resolve()


@dataclass(frozen=True)
class RunPlan:
    run_id: str
    cfg: PipelineConfig
    questions: QuestionSet
    examples: ExampleSet
    data_root: Path
    overrides: tuple[str, ...] = ()
    parent_run_id: str | None = None
    evidence_from: str | None = None
    reuse: ReuseSpec | None = None  # a reprocess: which stages come from the parent's rows
    note: str | None = None


def plan_run(
    questions_path: str | Path,
    *,
    variant: str = "final",
    overrides: Sequence[str] = (),
    run_id: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    ids: Sequence[str] | None = None,
    root: str | Path | None = None,
    fields: dict[str, str] | None = None,
    evidence_from: str | None = None,
) -> RunPlan:
    """Everything a run needs, validated before anything is written.

    A process plans a run once: the CLI plans to check its input before Prefect starts, and the
    flow it then calls gets the same plan back, with the questions file read once.
    """
    path = Path(questions_path)
    args = [str(path.resolve()), variant, list(overrides), run_id, limit, sample, list(ids or []),
            str(data_root(root)), fields, evidence_from]
    stat = path.stat() if path.exists() else None
    key = stable_hash([args, (stat.st_mtime_ns, stat.st_size) if stat else None])
    if key not in _PLANS:
        _PLANS[key] = _plan_run(path, variant=variant, overrides=overrides, run_id=run_id, limit=limit,
                                sample=sample, ids=ids, root=root, fields=fields, evidence_from=evidence_from)
        while len(_PLANS) > 16:
            _PLANS.pop(next(iter(_PLANS)))
    return _PLANS[key]


_PLANS: dict[str, RunPlan] = {}


def _plan_run(path: Path, *, variant: str, overrides: Sequence[str], run_id: str | None, limit: int | None,
              sample: int | None, ids: Sequence[str] | None, root: str | Path | None,
              fields: dict[str, str] | None, evidence_from: str | None) -> RunPlan:
    cfg = build_config(variant_overrides(variant), parse_overrides(list(overrides)), variant=variant)
    if uses_real_backends(cfg):  # a missing key stops the run before anything is written
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    every = load_questions(path, fields=fields)
    examples = resolve_example_set(cfg.generation.examples, every.format)
    questions = select_questions(every, limit=limit, sample=sample, ids=ids, exclude_ids=examples.ids)
    root_path = data_root(root)
    if evidence_from is not None:
        _require_run(Warehouse(root_path), evidence_from, "--evidence-from")
    if run_id is None:
        key = [questions.fingerprint, cfg.fingerprint(), evidence_from]
        run_id = f"{questions.slug}-{variant}-{stable_hash(key, 8)}"
    return RunPlan(check_run_id(run_id), cfg, questions, examples, root_path, tuple(overrides),
                   evidence_from=evidence_from)


def _require_run(warehouse: Warehouse, run_id: str, what: str) -> list[tuple]:
    rows = warehouse.query("SELECT config_json, variant, dataset, evidence_from FROM runs WHERE run_id = ?",
                           [check_run_id(run_id)]).rows
    if not rows:
        raise WarehouseError(f"{what}: no run {run_id!r} in {warehouse.root} (see `hifirag runs`)")
    return rows


def plan_reprocess(
    parent_run_id: str,
    *,
    from_stage: str,
    question_ids: Sequence[str] | None = None,
    overrides: Sequence[str] = (),
    run_id: str | None = None,
    root: str | Path | None = None,
) -> RunPlan:
    """A run derived from ``parent_run_id``: stages before ``from_stage`` (and every stage of the
    questions not chosen) come from the parent's rows; the rest is computed with ``overrides``."""
    warehouse = Warehouse(data_root(root))
    config_json, variant, dataset, evidence_from = _require_run(warehouse, parent_run_id, "reprocess")[0]
    spec = ReuseSpec(parent_run_id, from_stage, frozenset(question_ids) if question_ids else None)
    cfg = build_config(overrides=parse_overrides(list(overrides)), base=json.loads(config_json), variant=variant)
    if uses_real_backends(cfg):
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    stored = warehouse.query(
        "SELECT question_id, query, reference, line_no, meta_json FROM questions WHERE run_id = ? ORDER BY line_no",
        [parent_run_id]).rows
    questions = tuple(Question(qid, query, ref, line_no or 0, json.loads(meta) if meta else {})
                      for qid, query, ref, line_no, meta in stored)
    unknown = sorted(set(question_ids or ()) - {q.id for q in questions})
    if unknown:
        raise WarehouseError(f"run {parent_run_id!r} has no question(s) {unknown}")
    fmt = dataset if dataset in ("mmu_ragent", "docs_faq") else "custom"
    qs = QuestionSet(Path(f"run:{parent_run_id}"), fmt, questions)
    examples = resolve_example_set(cfg.generation.examples, fmt)
    if run_id is None:
        run_id = f"{parent_run_id}.re-{stable_hash([from_stage, sorted(question_ids or []), list(overrides)], 6)}"
    chosen = f"{len(question_ids)} question(s)" if question_ids else "every question"
    note = f"reprocess of {parent_run_id} from {from_stage} for {chosen}"
    return RunPlan(check_run_id(run_id[:128]), cfg, qs, examples, warehouse.root, tuple(overrides),
                   parent_run_id=parent_run_id, evidence_from=evidence_from, reuse=spec, note=note)


def run_context(plan: RunPlan, *, shared_limits: bool = False) -> RunContext:
    """What every process taking part in the run needs to know of it."""
    return RunContext(plan.run_id, str(plan.data_root), plan.cfg, plan.examples, plan.evidence_from, plan.reuse,
                      shared_limits)


@dataclass
class RunSummary:
    run_id: str
    status: str
    n_questions: int
    n_answered: int
    n_failed: int
    wall_seconds: float
    stage_computations: int
    cache_hits: int
    llm_calls_paid: int  # calls a model answered and billed (see hifirag_core.tally)
    llm_calls_reused: int
    data_root: str
    duckdb_path: str
    notes: list[str] = field(default_factory=list)
    llm_calls_unbilled: int = 0  # calls that reached no model or got no billed answer
    unanswered: dict[str, int] = field(default_factory=dict)  # why questions have no answer -> how many
    backend_errors: dict[str, int] = field(default_factory=dict)  # "openai <model>: failed" -> occurrences
    n_abstained: int = 0  # of n_answered: answers saying the sources found do not answer the question

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_record(plan: RunPlan, **fields: Any) -> RunRecord:
    return RunRecord(
        run_id=plan.run_id, variant=plan.cfg.variant, dataset=plan.questions.dataset,
        dataset_fingerprint=plan.questions.fingerprint, config_json=plan.cfg.to_json(),
        config_hash=plan.cfg.fingerprint(), parent_run_id=plan.parent_run_id,
        overrides_json=json.dumps(list(plan.overrides)) if plan.overrides else None,
        evidence_from=plan.evidence_from, n_questions=len(plan.questions),
        note="; ".join(n for n in (plan.note, plan.questions.note) if n) or None, **fields,
    )


def start_run(warehouse: Warehouse, plan: RunPlan) -> RunRecord:
    """Record the run as running and its questions as its input."""
    warehouse.uncompact_run(plan.run_id)  # a rerun of a finished run writes its keys again
    record = run_record(plan, status="running", started_at=utcnow())
    warehouse.write("runs", [record], run_id=plan.run_id, stage="run")
    for q in plan.questions.questions:
        gold_url, gold_anchor = gold_location(q.meta)
        row = QuestionRecord(query=q.query, reference=q.reference, dataset=plan.questions.dataset, line_no=q.line_no,
                             meta_json=json.dumps(q.meta, ensure_ascii=False) if q.meta else None,
                             gold_url=gold_url, gold_anchor=gold_anchor)
        warehouse.write("questions", [row], run_id=plan.run_id, stage="input", question_id=q.id)
    return record


def finish_run(warehouse: Warehouse, plan: RunPlan, started: RunRecord, summary: RunSummary) -> None:
    """Mark the run finished (or partial), compact its files and refresh the DuckDB file."""
    record = run_record(
        plan, status=summary.status, started_at=started.started_at, finished_at=utcnow(),
        n_answered=summary.n_answered, n_failed=summary.n_failed, wall_seconds=summary.wall_seconds,
        stage_computations=summary.stage_computations, cache_hits=summary.cache_hits,
        llm_calls_paid=summary.llm_calls_paid,
    )
    warehouse.write("runs", [record], run_id=plan.run_id, stage="run")
    warehouse.compact_run(plan.run_id)
    warehouse.refresh_duckdb_file()

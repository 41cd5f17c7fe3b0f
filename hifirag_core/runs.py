"""Run planning and bookkeeping: which questions, which config, which run id, and the runs table."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hifirag_core.config import DEFAULT_DATA_ROOT, PipelineConfig, build_config, parse_overrides
from hifirag_core.examples import ExampleSet, resolve_example_set
from hifirag_core.hashing import stable_hash
from hifirag_core.questions import QuestionSet, load_questions
from hifirag_core.records import QuestionRecord, RunRecord, utcnow
from hifirag_core.runtime import uses_real_backends
from hifirag_core.variants import variant_overrides
from hifirag_core.warehouse import Warehouse, check_run_id


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
) -> RunPlan:
    """Everything a run needs, validated before anything is written."""
    cfg = build_config(variant_overrides(variant), parse_overrides(list(overrides)), variant=variant)
    if uses_real_backends(cfg):  # a missing key stops the run before anything is written
        from hifirag_core.backends.factory import check_secrets

        check_secrets(cfg)
    probe = load_questions(Path(questions_path), fields=fields)
    examples = resolve_example_set(cfg.generation.examples, probe.format)
    questions = load_questions(Path(questions_path), fields=fields, limit=limit, sample=sample, ids=ids,
                               exclude_ids=examples.ids)
    if run_id is None:
        slug = questions.dataset.replace(":", "-")
        run_id = f"{slug}-{variant}-{stable_hash([questions.fingerprint, cfg.fingerprint()], 8)}"
    return RunPlan(check_run_id(run_id), cfg, questions, examples, data_root(root), tuple(overrides))


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
    llm_calls_paid: int
    llm_calls_reused: int
    data_root: str
    duckdb_path: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def run_record(plan: RunPlan, **fields: Any) -> RunRecord:
    return RunRecord(
        run_id=plan.run_id, variant=plan.cfg.variant, dataset=plan.questions.dataset,
        dataset_fingerprint=plan.questions.fingerprint, config_json=plan.cfg.to_json(),
        config_hash=plan.cfg.fingerprint(), parent_run_id=plan.parent_run_id,
        overrides_json=json.dumps(list(plan.overrides)) if plan.overrides else None,
        evidence_from=plan.evidence_from, n_questions=len(plan.questions), note=plan.questions.note, **fields,
    )


def start_run(warehouse: Warehouse, plan: RunPlan) -> RunRecord:
    """Record the run as running and its questions as its input."""
    record = run_record(plan, status="running", started_at=utcnow())
    warehouse.write("runs", [record], run_id=plan.run_id, stage="run")
    for q in plan.questions.questions:
        row = QuestionRecord(query=q.query, reference=q.reference, dataset=plan.questions.dataset, line_no=q.line_no,
                             meta_json=json.dumps(q.meta, ensure_ascii=False) if q.meta else None)
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

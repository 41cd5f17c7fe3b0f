"""A run's bookkeeping: its row in the runs table, its questions, and what it came to."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hifirag_core.corpus.sites import gold_location
from hifirag_core.pipeline.plan import RunPlan
from hifirag_core.records import QuestionRecord, RunRecord, TurnRecord, utcnow
from hifirag_core.store.warehouse import Warehouse


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
    llm_calls_paid: int  # calls a model answered and billed (see hifirag_core.pipeline.tally)
    llm_calls_reused: int
    data_root: str
    duckdb_path: str
    notes: list[str] = field(default_factory=list)
    llm_calls_unbilled: int = 0  # calls that reached no model or got no billed answer
    unanswered: dict[str, int] = field(default_factory=dict)  # why questions have no answer -> how many
    backend_errors: dict[str, int] = field(default_factory=dict)  # "openai <model>: failed" -> occurrences
    n_abstained: int = 0  # of n_answered: answers saying the sources found do not answer the question
    search_calls: int = 0  # searches sent to a provider (neither reused nor answered from the search cache)
    cost_usd: float = 0.0  # the run's own model and search calls (what reused ones cost was paid before)
    n_looked_again: int = 0  # questions that ran at least one follow-up round (a variant that looks again)
    follow_up_rounds: int = 0

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
        if q.earlier is not None:  # a follow-up turn of an earlier run's answer: its place in the thread
            warehouse.write(TurnRecord.TABLE, [q.earlier.turn_row()], run_id=plan.run_id, stage="thread",
                            question_id=q.id)
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

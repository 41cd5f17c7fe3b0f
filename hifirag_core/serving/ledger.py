"""Where served questions live in the warehouse: one service run per day, one row per request.

Every request joins the day's service run, ``service-<profile>-<variant>-<config>-<YYYYMMDD>`` (UTC):
its question, every stage's rows and the answer are written exactly as a batch run writes them,
so the views, ``hifirag eval``-style scoring and ``export-mmu`` work on served answers too. A
day bounds a run's size, and so the cost of a write into a compacted run (the writer reads the
compacted file to drop the key it replaces). The run's ``runs`` row says ``serving`` while the
service writes to it, with counts taken from the warehouse itself (so several service processes
on one data root count together), and ``finished`` once its day is over or the service stops,
when its files are compacted; a busy day is also compacted every ``compact_every`` questions.

A follow-up turn (a request that names the answer it follows) also gets its ``turns`` row: its turn
number and the answer it follows, in the thread's place. The service follows only its own answers: those
of its runs, of any day (``ServiceRuns.foreign``).

``served_requests`` holds what only the service knows: the endpoint, how the response ended
(complete, deadline, disconnected, failed), the time to its first message and to its end.
"""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime
from pathlib import Path

from hifirag_core.config import PipelineConfig
from hifirag_core.llm.examples import ExampleSet
from hifirag_core.pipeline.plan import RunPlan
from hifirag_core.pipeline.runs import run_record
from hifirag_core.questions import Question, QuestionSet
from hifirag_core.records import QuestionRecord, RunRecord, TurnRecord, utcnow
from hifirag_core.records.serving import ServedRequestRecord
from hifirag_core.store.warehouse import Warehouse, check_run_id

SERVICE_DATASET = "service"


def service_run_id(profile: str, cfg: PipelineConfig, day: date) -> str:
    """The service run of one day for one configuration."""
    return check_run_id(f"{_service_prefix(profile, cfg)}{day:%Y%m%d}")


def _service_prefix(profile: str, cfg: PipelineConfig) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "-", profile.partition(":")[0])  # "llama-cpp:MODEL@URL" -> "llama-cpp"
    return f"service-{name}-{cfg.variant}-{cfg.fingerprint()[:8]}-"


class ServiceRuns:
    """The day's service run: started on first use, its counts refreshed, compacted when it closes."""

    def __init__(self, warehouse: Warehouse, profile: str, cfg: PipelineConfig, examples: ExampleSet,
                 overrides: Sequence[str] = (), *, compact_every: int = 500,
                 clock: Callable[[], datetime] = utcnow):
        self.warehouse = warehouse
        self.profile = profile
        self.cfg = cfg
        self.examples = examples
        self.overrides = tuple(overrides)
        self.compact_every = compact_every
        self.clock = clock
        self._lock = threading.Lock()
        self._plans: dict[str, RunPlan] = {}
        self._started: dict[str, datetime] = {}  # run id -> its started_at
        self._open: str | None = None  # the run written to now
        self._added = 0  # questions and answers since the last refresh
        self._uncompacted = 0  # questions since the last compaction

    def plan(self) -> RunPlan:
        """Today's run (a pure function of the date and the config; nothing is written)."""
        run_id = service_run_id(self.profile, self.cfg, self.clock().astimezone(UTC).date())
        with self._lock:
            if run_id not in self._plans:
                questions = QuestionSet(Path(SERVICE_DATASET), SERVICE_DATASET, ())
                self._plans[run_id] = RunPlan(run_id, self.cfg, questions, self.examples, self.warehouse.root,
                                              self.overrides, note=f"served by `hifirag serve --profile {self.profile}`")
            return self._plans[run_id]

    def foreign(self, run_id: str) -> str | None:
        """Why an answer of ``run_id`` is not one a request may follow (None: it is one of this service's runs,
        of any day, so a thread goes on across restarts and midnight)."""
        prefix = _service_prefix(self.profile, self.cfg)
        day = run_id.removeprefix(prefix)
        if run_id.startswith(prefix) and len(day) == 8 and day.isdigit():
            return None
        return f"run {run_id} is not one of this service's runs, {prefix}<YYYYMMDD>"

    def add_question(self, plan: RunPlan, question: Question) -> None:
        """Record a request's question in its run, starting the run (and closing the previous day's) first; a
        follow-up turn's place in its thread too."""
        self._open_run(plan)
        meta = json.dumps(question.meta, ensure_ascii=False) if question.meta else None
        row = QuestionRecord(query=question.query, reference=question.reference, dataset=SERVICE_DATASET,
                             line_no=question.line_no, meta_json=meta)
        self.warehouse.write("questions", [row], run_id=plan.run_id, stage="input", question_id=question.id)
        if question.earlier is not None:
            self.warehouse.write(TurnRecord.TABLE, [question.earlier.turn_row()], run_id=plan.run_id,
                                 stage="thread", question_id=question.id)
        with self._lock:
            self._added += 1
            self._uncompacted += 1

    def answered(self) -> None:
        """A question's rows (its answer among them) have landed: the next refresh counts them."""
        with self._lock:
            self._added += 1

    def record_served(self, plan: RunPlan, question_id: str, record: ServedRequestRecord) -> None:
        self.warehouse.write(ServedRequestRecord.TABLE, [record], run_id=plan.run_id, stage=record.stage,
                             question_id=question_id)

    def _open_run(self, plan: RunPlan) -> None:
        with self._lock:
            if self._open == plan.run_id:
                return
            previous, self._open = self._open, plan.run_id
        if previous is not None:
            self.close(previous)
        self.warehouse.uncompact_run(plan.run_id)  # a restart on the same day writes to it again
        rows = self.warehouse.query("SELECT started_at FROM runs WHERE run_id = ?", [plan.run_id]).rows
        with self._lock:
            self._started[plan.run_id] = rows[0][0] if rows and rows[0][0] else self.clock()
        self._write_run(plan.run_id, "serving")

    def refresh(self, *, force: bool = False, compact: bool = True) -> None:
        """Rewrite the open run's counts when questions came in since the last time; compact it now and then
        (``compact=False``: not this time, so that the refresh is quick; a later one does it)."""
        with self._lock:
            run_id, added = self._open, self._added
            compact = compact and self._uncompacted >= self.compact_every
            self._added = 0
            if compact:
                self._uncompacted = 0
        if run_id is None or not (added or force or compact):
            return
        self._write_run(run_id, "serving")
        if compact:
            self.warehouse.compact_run(run_id)
        self.warehouse.refresh_duckdb_file()

    def close(self, run_id: str | None = None) -> None:
        """Mark a run (default: the open one) finished, compact it and refresh the DuckDB file."""
        with self._lock:
            run_id = run_id or self._open
            if run_id == self._open:
                self._open = None
        if run_id is None:
            return
        self._write_run(run_id, "finished", finished_at=self.clock())
        self.warehouse.compact_run(run_id)
        self.warehouse.refresh_duckdb_file()

    def _write_run(self, run_id: str, status: str, **fields: object) -> None:
        (n_questions, answered, failed, computed, reused, paid), = self.warehouse.query(
            """SELECT (SELECT count(*) FROM questions WHERE run_id = ?),
                      (SELECT count(*) FROM answers WHERE run_id = ? AND status = 'ok'),
                      (SELECT count(*) FROM answers WHERE run_id = ? AND status <> 'ok'),
                      (SELECT count(*) FROM stage_runs WHERE run_id = ? AND NOT cached),
                      (SELECT count(*) FROM stage_runs WHERE run_id = ? AND cached),
                      (SELECT count(*) FROM llm_calls WHERE run_id = ? AND NOT cache_hit)""",
            [run_id] * 6).rows
        record: RunRecord = run_record(self._plans[run_id], status=status, started_at=self._started[run_id],
                                       n_answered=answered, n_failed=failed, stage_computations=computed,
                                       cache_hits=reused, llm_calls_paid=paid, **fields)
        record = dataclasses.replace(record, n_questions=n_questions)
        self.warehouse.write("runs", [record], run_id=run_id, stage="run")

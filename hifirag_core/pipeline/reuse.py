"""Taking stage outputs from another run's rows instead of computing them.

Two uses:

* **reprocess**: a new run derived from a parent run reuses the parent's rows for every stage
  before the one named (and for every stage of the questions not chosen), and recomputes the rest
  (which stages, for which questions: ``hifirag_core.pipeline.plan.ReuseSpec``);
* **evidence replay**: a run takes the stages whose spec says ``evidence`` (the query plans and
  search results) and its pages from another run, so that two variants read byte-identical evidence
  even when the live web has changed.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.plan import ReuseSpec
from hifirag_core.pipeline.specs import spec
from hifirag_core.questions import Question
from hifirag_core.records import LLMCallRecord, PageRecord, Record, SearchCallRecord, StageRunRecord
from hifirag_core.store.warehouse import Warehouse


class StoredRun:
    """A run's rows, read once and served by stage, question and round.

    A stage whose rows the run's ledger counts but its tables no longer hold (a file damaged or deleted:
    ``hifirag warehouse check``) is not served: the run reusing it computes it again, from the stage
    cache where that holds it, instead of taking a stage's output with rows missing."""

    def __init__(self, warehouse: Warehouse, run_id: str):
        self.warehouse = warehouse
        self.run_id = run_id
        self._rows: dict[str, dict[tuple[str, str, int], list[Record]]] = {}
        self._lock = threading.Lock()

    def _table(self, table: str) -> dict[tuple[str, str, int], list[Record]]:
        with self._lock:
            if table not in self._rows:
                grouped: dict[tuple[str, str, int], list[Record]] = defaultdict(list)
                for rec in self.warehouse.read_records(table, self.run_id):
                    grouped[(rec.stage, rec.question_id, rec.round or 0)].append(rec)
                self._rows[table] = dict(grouped)
            return self._rows[table]

    def exists(self) -> bool:
        return bool(self._table("runs"))

    def output(self, stage: str, question: Question, round: int = 0) -> StageOutput | None:
        """The stage's output for the question in ``round`` as the run stored it, or None if it has none."""
        stage_spec = spec(stage)
        key = (stage, question.id, round)
        ledger = [r for r in self._table("stage_runs").get(key, []) if isinstance(r, StageRunRecord)]
        found = [self._table(table).get(key) for table in stage_spec.tables]
        if not ledger and all(rows is None for rows in found):
            return None
        records = [r for rows in found for r in rows or []]
        if ledger and ledger[0].n_rows is not None and ledger[0].n_rows != len(records):
            return None  # rows lost with a damaged or deleted file: the stage is computed again (from the cache)
        calls = [r for r in self._table("llm_calls").get(key, []) if isinstance(r, LLMCallRecord)]
        searches = tuple(r for r in self._table("search_calls").get(key, []) if isinstance(r, SearchCallRecord))
        status = ledger[0].status if ledger else (records[0].status if records else "ok")
        error = ledger[0].error if ledger else None
        return StageOutput(stage=stage, records=records, calls=calls, search_calls=searches,
                           value=stage_spec.rebuild(question, records), status=status, error=error, round=round)

    def pages_by_url(self) -> dict[str, PageRecord]:
        """Every page the run fetched successfully, by URL."""
        pages: dict[str, PageRecord] = {}
        for records in self._table("pages").values():
            for rec in records:
                if isinstance(rec, PageRecord) and rec.ok and rec.content_sha256:
                    pages.setdefault(rec.url, rec)
        return pages


@dataclass
class RunReuse:
    """A run's sources of stored outputs: its parent (reprocess) and its pinned evidence."""

    spec: ReuseSpec | None = None
    stored: StoredRun | None = None
    evidence: StoredRun | None = None

    def stored_output(self, stage: str, question: Question, round: int = 0) -> tuple[StageOutput, str] | None:
        """The stored output this question reuses for this stage and round, and the run it comes from."""
        if self.spec is not None and self.stored is not None and self.spec.reused(stage, question.id, round):
            out = self.stored.output(stage, question, round)
            if out is not None:
                return out, self.stored.run_id
        if self.evidence is not None and spec(stage).evidence:
            out = self.evidence.output(stage, question, round)
            if out is not None:
                return out, self.evidence.run_id
        return None

    def recompute(self, stage: str, question_id: str, round: int = 0) -> bool:
        """True when a reprocess asks for this stage to be computed afresh, cached or not."""
        return self.spec is not None and not self.spec.reused(stage, question_id, round)

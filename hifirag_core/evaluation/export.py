"""The MMU-RAGent static submission file: one ``{"query_id", "generated_response"}`` JSON object per line.

Every question of the run appears exactly once, in the order of the question file, and no
response is empty. A question the run has no answer for (no evidence, a failed stage, a run that
stopped early) gets ``NO_ANSWER_RESPONSE``, a fixed sentence that says so, because the organisers'
format has no way to mark an answer as missing and a missing line would fail the submission; the
exporter lists those ids. ``strict`` refuses to write a file with any such line instead.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.warehouse import Warehouse, WarehouseError, check_run_id

NO_ANSWER_RESPONSE = "I could not find enough evidence to answer this question."


@dataclass(frozen=True)
class Submission:
    """The lines of a submission file, and which questions got the fixed no-answer response."""

    lines: list[dict[str, str]]
    no_answer: list[tuple[str, str]]  # (question id, why)
    dataset: str | None
    run_status: str | None


def build_submission(warehouse: Warehouse, run_id: str) -> Submission:
    """One line per question of the run, each with its answer or the fixed no-answer response."""
    runs = warehouse.query("SELECT status, dataset FROM runs WHERE run_id = ?", [check_run_id(run_id)]).rows
    if not runs:
        raise WarehouseError(f"no run {run_id!r} in {warehouse.root} (see `hifirag runs`)")
    rows = warehouse.query(
        """SELECT q.question_id, a.status, a.text, a.error FROM questions q
           LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no, q.question_id""", [run_id]).rows
    lines: list[dict[str, str]] = []
    no_answer: list[tuple[str, str]] = []
    seen: set[str] = set()
    for qid, status, text, error in rows:
        if qid in seen:  # the warehouse keys a question's rows by id; a second row would be a bug upstream
            raise WarehouseError(f"run {run_id!r} holds question {qid!r} twice")
        seen.add(qid)
        response = (text or "").strip()
        if not response:
            why = "the run has no answer row" if status is None else f"{status}: {error or 'no answer text'}"
            no_answer.append((qid, why))
            response = NO_ANSWER_RESPONSE
        lines.append({"query_id": qid, "generated_response": response})
    if not lines:
        raise WarehouseError(f"run {run_id!r} has no questions")
    return Submission(lines, no_answer, runs[0][1], runs[0][0])


def write_submission(submission: Submission, path: Path) -> Path:
    """Write the JSONL file atomically (a crash never leaves half a submission)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for line in submission.lines:
            fh.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    return path


def check_submission(path: Path, expected_ids: list[str] | None = None) -> list[str]:
    """Problems with a submission file: bad JSON, wrong keys, empty responses, repeated or missing ids."""
    problems: list[str] = []
    seen: set[str] = set()
    for n, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError:
            problems.append(f"line {n}: not JSON")
            continue
        if not isinstance(obj, dict) or set(obj) != {"query_id", "generated_response"}:
            problems.append(f"line {n}: expected exactly the keys query_id and generated_response")
            continue
        qid, response = obj["query_id"], obj["generated_response"]
        if not isinstance(response, str) or not response.strip():
            problems.append(f"line {n}: empty response for {qid!r}")
        if qid in seen:
            problems.append(f"line {n}: {qid!r} appears again")
        seen.add(qid)
    if expected_ids is not None:
        missing = [q for q in expected_ids if q not in seen]
        if missing:
            problems.append(f"missing ids: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''}")
    return problems

"""The MMU-RAGent static submission file: one ``{"query_id", "generated_response"}`` JSON object per line.

Every question of the run appears exactly once, in the order of the question file, and no
response is empty. A question the run has no answer for (no evidence, a failed stage, a run that
stopped early) gets ``NO_ANSWER_RESPONSE``, a fixed sentence that says so, because the organisers'
format has no way to mark an answer as missing and a missing line would fail the submission; the
exporter lists those ids. ``strict`` refuses to write a file with any such line instead.

The organisers score ``generated_response`` as text against a reference without citations, so by
default it is the answer's text alone. With ``citations`` it is the answer as ``hifirag`` shows it:
each sentence followed by the ``[k]`` of the source the citation stage cited for it, then the
numbered source URLs (the live track's answers carry their citations this way).
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

from hifirag_core.serving.contract import NO_ANSWER_RESPONSE
from hifirag_core.store.warehouse import Warehouse, WarehouseError, check_run_id


@dataclass(frozen=True)
class Submission:
    """The lines of a submission file, and which questions got the fixed no-answer response."""

    lines: list[dict[str, str]]
    no_answer: list[tuple[str, str]]  # (question id, why)
    dataset: str | None
    run_status: str | None


def with_sources(cited_text: str, urls: list[str]) -> str:
    """The cited answer followed by its numbered sources (``[k] url``)."""
    if not urls:
        return cited_text
    return cited_text + "\n\nSources:\n" + "\n".join(f"[{k}] {url}" for k, url in enumerate(urls, 1))


def build_submission(warehouse: Warehouse, run_id: str, *, citations: bool = False) -> Submission:
    """One line per question of the run, each with its answer (with its per-sentence citations when
    ``citations``) or the fixed no-answer response."""
    runs = warehouse.query("SELECT status, dataset FROM runs WHERE run_id = ?", [check_run_id(run_id)]).rows
    if not runs:
        raise WarehouseError(f"no run {run_id!r} in {warehouse.root} (see `hifirag runs`)")
    rows = warehouse.query(
        """SELECT q.question_id, a.status, a.text, a.error, a.cited_text, a.cited_urls FROM questions q
           LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no, q.question_id""", [run_id]).rows
    lines: list[dict[str, str]] = []
    no_answer: list[tuple[str, str]] = []
    seen: set[str] = set()
    for qid, status, text, error, cited_text, cited_urls in rows:
        if qid in seen:  # the warehouse keys a question's rows by id; a second row would be a bug upstream
            raise WarehouseError(f"run {run_id!r} holds question {qid!r} twice")
        seen.add(qid)
        response = (text or "").strip()
        if response and citations and cited_text:
            response = with_sources(cited_text.strip(), list(cited_urls or []))
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


@dataclass(frozen=True)
class CitedSentenceRow:
    """One sentence of an answer with the sources cited for it, as the citation stage decided."""

    sentence: str
    urls: list[str]
    support: float | None
    method: str


@dataclass(frozen=True)
class CitedAnswer:
    """A question of a run with its answer as the user reads it: per-sentence [k] markers and sources."""

    question_id: str
    query: str
    reference: str | None
    status: str | None
    error: str | None
    text: str | None
    cited_text: str | None
    urls: list[str]  # [k] in cited_text is urls[k - 1]
    sentences: list[CitedSentenceRow]
    answerability: str | None = None  # answered | partial | not_found
    answerability_score: float | None = None


def cited_answers(warehouse: Warehouse, run_id: str, question_ids: list[str] | None = None) -> list[CitedAnswer]:
    """The run's answers with their per-sentence citations, in question-file order."""
    if not warehouse.query("SELECT 1 FROM runs WHERE run_id = ?", [check_run_id(run_id)]).rows:
        raise WarehouseError(f"no run {run_id!r} in {warehouse.root} (see `hifirag runs`)")
    rows = warehouse.query(
        """SELECT q.question_id, q.query, q.reference, a.status, a.error, a.text, a.cited_text, a.cited_urls,
                  a.answerability, a.answerability_score
           FROM questions q LEFT JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no, q.question_id""", [run_id]).rows
    sentences: dict[str, list[CitedSentenceRow]] = {}
    for qid, sentence, urls, support, method in warehouse.query(
            """SELECT question_id, sentence, urls, support, method FROM answer_sentences WHERE run_id = ?
               ORDER BY question_id, sentence_index""", [run_id]).rows:
        sentences.setdefault(qid, []).append(CitedSentenceRow(sentence, list(urls or []), support, method))
    wanted = set(question_ids) if question_ids else None
    if wanted is not None and (unknown := wanted - {r[0] for r in rows}):
        raise WarehouseError(f"run {run_id!r} has no question(s) {', '.join(sorted(unknown))}")
    return [CitedAnswer(qid, query, ref, status, error, text, cited_text, list(urls or []), sentences.get(qid, []),
                        verdict, score)
            for qid, query, ref, status, error, text, cited_text, urls, verdict, score in rows
            if wanted is None or qid in wanted]

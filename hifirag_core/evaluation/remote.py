"""Evaluate any service that speaks the MMU-RAGent contract, this one or another team's, on our questions.

    questions (as `hifirag eval` selects them) ─► POST /evaluate (or a streamed POST /run) per question
        ─► a run in the warehouse with the service's answers ─► result.jsonl in the organisers' static format
        ─► scored, gated and reported by the existing evaluation

The answers become a run of their own (``runs``, ``questions``, ``answers``, and one ``stage_runs``
row per question, stage ``remote``, holding the request's seconds), so the existing scoring reads
them as it reads a batch run, ``export-mmu`` writes the same file, and two services compare on the
same question ids in SQL. The evaluation's "variant" is the service's label; a later evaluation of
the same label on the same questions is compared with it (the regression gate). Cost is unknown
for a remote service, and ``cost_usd`` is 0.

A question the service did not answer (an HTTP error, a timeout, a reply that breaks the contract)
gets a status row and, in result.jsonl, the fixed no-answer sentence, as ``export-mmu`` does. A
service that is full (503) is asked again after its ``Retry-After``. With ``endpoint="run"`` every
stream is also checked against the contract and its problems are listed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import httpx

from hifirag_core.evaluation.datasets import resolve_dataset
from hifirag_core.evaluation.eval_config import EvaluationConfig
from hifirag_core.evaluation.eval_steps import (
    EvaluationPlan,
    Scorer,
    build_report,
    evaluation_records,
    gate_variant,
    outcome,
    score_variant,
    write_evaluation,
    write_report,
)
from hifirag_core.evaluation.export import build_submission, check_submission, write_submission
from hifirag_core.hashing import stable_hash
from hifirag_core.pipeline.plan import plan_run
from hifirag_core.pipeline.specs import ANSWER_STAGE
from hifirag_core.questions import Question, QuestionSet
from hifirag_core.records import AnswerRecord, QuestionRecord, RunRecord, StageRunRecord, utcnow
from hifirag_core.serving.contract import COMPETITION_LIMIT_S, check_messages, parse_sse
from hifirag_core.store.warehouse import Warehouse, check_run_id
from hifirag_core.text import word_count

Endpoint = Literal["evaluate", "run"]
REMOTE_STAGE = "remote"
_MAX_RETRY_AFTER_S = 60.0


class RemoteError(RuntimeError):
    """The service cannot be evaluated at all (it does not answer its health check)."""


@dataclass
class RemoteAnswer:
    """What the service gave for one question."""

    question_id: str
    text: str | None = None
    status: str = "ok"  # ok | http_<code> | timeout | unreachable | bad_response | stream_error
    error: str | None = None
    seconds: float = 0.0
    citations: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # the stream's departures from the contract (/run)


class RemoteService:
    """A client of the contract: ``/health``, ``/evaluate`` and ``/run``."""

    def __init__(self, base_url: str, *, timeout_s: float = COMPETITION_LIMIT_S, client: httpx.Client | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        # The read timeout is a whole answer's time: /evaluate replies only once it has one.
        self.client = client or httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0))
        self.sleep = sleep

    def health(self) -> dict:
        """The service's health JSON; ``RemoteError`` when it does not give one."""
        try:
            response = self.client.get(f"{self.base_url}/health", timeout=30.0)
        except httpx.HTTPError as exc:
            raise RemoteError(f"{self.base_url}/health: no answer ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise RemoteError(f"{self.base_url}/health answered HTTP {response.status_code}")
        try:
            return response.json()
        except ValueError:
            raise RemoteError(f"{self.base_url}/health did not answer with JSON") from None

    def ask(self, question: Question, endpoint: Endpoint) -> RemoteAnswer:
        """One question, asked again while the service says it is full, within ``timeout_s``."""
        began = time.monotonic()
        while True:
            try:
                answer = self._evaluate(question) if endpoint == "evaluate" else self._run(question, began)
            except httpx.TimeoutException:
                answer = RemoteAnswer(question.id, status="timeout", error=f"no answer within {self.timeout_s:.0f} s")
            except httpx.HTTPError as exc:
                answer = RemoteAnswer(question.id, status="unreachable", error=type(exc).__name__)
            except _Busy as busy:
                if time.monotonic() - began + busy.wait < self.timeout_s:
                    self.sleep(busy.wait)
                    continue
                answer = RemoteAnswer(question.id, status="http_503", error="the service stayed full")
            answer.seconds = round(time.monotonic() - began, 4)
            return answer

    def _evaluate(self, question: Question) -> RemoteAnswer:
        response = self.client.post(f"{self.base_url}/evaluate", json={"query": question.query, "iid": question.id})
        _raise_if_busy(response)
        if response.status_code != 200:
            return RemoteAnswer(question.id, status=f"http_{response.status_code}", error=response.text[:200])
        try:
            body = response.json()
        except ValueError:
            return RemoteAnswer(question.id, status="bad_response", error="the reply is not JSON")
        if not isinstance(body, dict) or body.get("query_id") != question.id:
            return RemoteAnswer(question.id, status="bad_response", error="the reply's query_id is not the iid sent")
        text = body.get("generated_response")
        if not isinstance(text, str) or not text.strip():
            return RemoteAnswer(question.id, status="bad_response", error="generated_response is empty or not text")
        return RemoteAnswer(question.id, text.strip())

    def _run(self, question: Question, began: float) -> RemoteAnswer:
        with self.client.stream("POST", f"{self.base_url}/run", json={"question": question.query}) as response:
            _raise_if_busy(response)
            if response.status_code != 200:
                response.read()
                return RemoteAnswer(question.id, status=f"http_{response.status_code}", error=response.text[:200])
            lines: list[str] = []
            for line in response.iter_lines():
                lines.append(line)
                if time.monotonic() - began > self.timeout_s:
                    raise httpx.ReadTimeout("the stream outlived the time limit")
        parsed = parse_sse(lines)
        problems = parsed.problems + check_messages(parsed.messages)
        last = parsed.messages[-1] if parsed.messages else {}
        text = last.get("final_report") if last.get("complete") is True else None
        citations = [u for u in last.get("citations") or [] if isinstance(u, str)]
        if last.get("error") is not None or not isinstance(text, str) or not text.strip():
            return RemoteAnswer(question.id, status="stream_error", error=str(last.get("error") or "no final report")[:200],
                                problems=problems)
        return RemoteAnswer(question.id, text.strip(), citations=citations, problems=problems)


class _Busy(Exception):
    def __init__(self, wait: float):
        super().__init__(wait)
        self.wait = wait


def _raise_if_busy(response: httpx.Response) -> None:
    if response.status_code == 503:
        try:
            wait = float(response.headers.get("Retry-After", "5"))
        except ValueError:
            wait = 5.0
        raise _Busy(min(max(wait, 0.5), _MAX_RETRY_AFTER_S))


def ask_all(service: RemoteService, questions: Sequence[Question], endpoint: Endpoint, *, parallel: int = 4,
            progress: Callable[[RemoteAnswer], None] | None = None) -> list[RemoteAnswer]:
    """Every question, ``parallel`` at a time; answers in question order."""
    def one(question: Question) -> RemoteAnswer:
        answer = service.ask(question, endpoint)
        if progress is not None:
            progress(answer)
        return answer

    with ThreadPoolExecutor(max(1, parallel), thread_name_prefix="remote") as pool:
        return list(pool.map(one, questions))


def import_answers(warehouse: Warehouse, run_id: str, questions: QuestionSet, answers: Sequence[RemoteAnswer], *,
                   label: str, url: str, endpoint: Endpoint, started: datetime) -> RunRecord:
    """The service's answers as a run: its questions, answers and one ``remote`` stage row per question."""
    by_id = {a.question_id: a for a in answers}
    for q in questions.questions:
        a = by_id[q.id]
        warehouse.write("questions", [QuestionRecord(query=q.query, reference=q.reference, dataset=questions.dataset,
                                                     line_no=q.line_no)], run_id=run_id, stage="input", question_id=q.id)
        row = (AnswerRecord(text=a.text, n_words=word_count(a.text), cited_urls=a.citations, from_stage=REMOTE_STAGE)
               if a.status == "ok" else AnswerRecord(status=a.status, error=a.error))
        warehouse.write("answers", [row], run_id=run_id, stage=ANSWER_STAGE, question_id=q.id)
        if a.status != "ok":
            status, error = a.status, a.error
        else:  # answered; a stream that broke the contract says how
            status, error = ("contract", "; ".join(a.problems[:5])) if a.problems else ("ok", None)
        ledger = StageRunRecord(stage=REMOTE_STAGE, status=status, error=error, seconds=a.seconds,
                                compute_seconds=a.seconds, n_rows=1)
        warehouse.write("stage_runs", [ledger], run_id=run_id, stage=None, question_id=q.id)
    answered = sum(1 for a in answers if a.status == "ok")
    config = {"remote_url": url, "endpoint": f"/{endpoint}", "label": label}
    record = RunRecord(variant=label, dataset=questions.dataset, dataset_fingerprint=questions.fingerprint,
                       config_json=json.dumps(config, sort_keys=True), config_hash=stable_hash(config),
                       status="finished" if answered == len(answers) else "partial", started_at=started,
                       finished_at=utcnow(), n_questions=len(answers), n_answered=answered,
                       n_failed=len(answers) - answered, wall_seconds=round((utcnow() - started).total_seconds(), 2),
                       stage_computations=len(answers), cache_hits=0, llm_calls_paid=0,
                       note=f"answers from {url} (/{endpoint})")
    warehouse.write("runs", [record], run_id=run_id, stage="run")
    warehouse.compact_run(run_id)
    return record


def default_label(url: str) -> str:
    """``remote-<host>-<port>``: what names a service's evaluations when no label is given."""
    parts = urlsplit(url)
    where = parts.hostname or "service"
    return "remote-" + "".join(c if c.isalnum() else "-" for c in f"{where}-{parts.port or parts.scheme}")


def evaluate_remote(url: str, dataset: str, *, cfg: EvaluationConfig, root: Path, endpoint: Endpoint = "evaluate",
                    label: str | None = None, parallel: int = 4, timeout_s: float = COMPETITION_LIMIT_S,
                    limit: int | None = None, sample: int | None = None, ids: Sequence[str] | None = None,
                    fields: dict[str, str] | None = None, out: Path | None = None, report_dir: Path | None = None,
                    baseline: str | None = None, accept: bool = False, client: httpx.Client | None = None,
                    progress: Callable[[RemoteAnswer], None] | None = None) -> dict:
    """Ask the service every question, write result.jsonl, score it; the evaluation's outcome (as ``hifirag
    eval`` returns it) with ``result_path``, ``run_id``, ``health`` and the streams' ``contract_problems``."""
    started = utcnow()
    ds = resolve_dataset(dataset, fields)
    if limit is None and sample is None and not ids:
        limit = ds.default_limit
    # The questions `hifirag eval` would answer, so this service compares with our runs question by question.
    questions = plan_run(ds.path, overrides=ds.overrides, limit=limit, sample=sample, ids=ids, root=root,
                         fields=ds.fields).questions
    label = label or default_label(url)
    service = RemoteService(url, timeout_s=timeout_s, client=client)
    health = service.health()
    answers = ask_all(service, questions.questions, endpoint, parallel=parallel, progress=progress)

    warehouse = Warehouse(root)
    stamp = started.strftime("%Y%m%dT%H%M%S")
    key = stable_hash([url, endpoint, questions.fingerprint, stamp], 6)
    run_id = check_run_id(f"{label}-{ds.slug}-{stamp}-{key}"[:128])
    import_answers(warehouse, run_id, questions, answers, label=label, url=url, endpoint=endpoint, started=started)
    result_path = Path(out) if out else root / "reports" / "remote" / run_id / "result.jsonl"
    submission = build_submission(warehouse, run_id)
    write_submission(submission, result_path)
    problems = check_submission(result_path, [q.id for q in questions.questions])
    if problems:  # the writer's own contract; a failure here is a bug
        raise RuntimeError(f"{result_path}: " + "; ".join(problems))

    plan = EvaluationPlan(
        check_run_id(f"eval-{ds.slug}-{stamp}-{stable_hash([run_id, cfg.model_dump(mode='json')], 6)}"[:128]),
        ds, ds.fingerprint(questions), (label,), ds.overrides, (), limit, sample, tuple(ids) if ids else None,
        Path(root), cfg, baseline, accept, {q.id: q.query for q in questions.questions})
    scorer = Scorer(cfg, root)
    scored = score_variant(warehouse, plan, label, run_id, scorer)
    result = gate_variant(warehouse, plan, scored)
    report = build_report(plan, [result], scorer.spec.label if scorer.spec else None)
    md_path, html_path = write_report(report, Path(report_dir) if report_dir else root / "reports" / "evaluations")
    write_evaluation(warehouse, plan, evaluation_records(plan, [scored], [result], started, html_path))
    summary = {"run_id": run_id, "n_questions": len(answers), "n_answered": sum(1 for a in answers if a.status == "ok")}
    contract = {a.question_id: a.problems for a in answers if a.problems}
    not_answered = {a.question_id: f"{a.status}: {a.error}" for a in answers if a.status != "ok"}
    return {**outcome(plan, [result], md_path, html_path, [summary]), "run_id": run_id, "label": label,
            "result_path": str(result_path), "health": health, "contract_problems": contract,
            "not_answered": not_answered, "endpoint": f"/{endpoint}"}

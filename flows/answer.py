"""The batch answer flow: every question through every stage, every stage's rows in the warehouse.

    question ─► query plan ─► search ─► URL filter ─► fetch ─► sections ─► section ranking
             ─► draft ─► refine ─► citations ─► answer

Questions run in parallel (at most ``limits.concurrency`` at a time), each as one parent task
that calls the stage tasks in order; a stage task that fails after its retries leaves a status
row and the question goes on with what it has. When a question finishes, the flow writes all of
its stage rows (and the LLM calls behind them) through the warehouse's one writer.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import timedelta

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import ThreadPoolTaskRunner
from prefect.transactions import CommitMode, transaction

from hifirag_core import stages
from hifirag_core.corpus.store import CorpusError
from hifirag_core.limits import question_deadline
from hifirag_core.questions import Question
from hifirag_core.records import StageRunRecord
from hifirag_core.reuse import RunReuse, StoredRun
from hifirag_core.runs import RunPlan, RunSummary, finish_run, plan_run, start_run
from hifirag_core.runtime import Runtime, build_runtime, corpus_at
from hifirag_core.stages import StageOutput
from hifirag_core.warehouse import Warehouse
from tasks.answer import assemble_answer
from tasks.citations import verify_citations
from tasks.draft import write_draft
from tasks.fetch import fetch_pages
from tasks.query_plan import plan_query
from tasks.refine import refine_answer
from tasks.search import search_web
from tasks.section_rank import rank_sections
from tasks.sections import split_sections
from tasks.url_filter import filter_urls


@dataclass
class QuestionResult:
    question: Question
    outputs: list[StageOutput] = field(default_factory=list)
    ledger: list[StageRunRecord] = field(default_factory=list)  # one per output, same order
    seconds: float = 0.0

    @property
    def cached(self) -> list[bool]:
        return [row.cached for row in self.ledger]

    @property
    def answer(self) -> StageOutput | None:
        return next((o for o in self.outputs if o.stage == "answer"), None)


def _task_options(stage: str, rt: Runtime) -> dict:
    """Live search results and crawled pages age: their cached results expire (the local corpus's never do).

    The age is part of these stages' cache keys too, so a shorter age takes effect at once rather than
    when the results stored under the old one expire.
    """
    if stage == "search" and rt.cfg.backends.search != "local":
        return {"cache_expiration": timedelta(hours=rt.cfg.search.max_age_hours)}
    if stage == "fetch" and rt.cfg.backends.fetch != "local":
        return {"cache_expiration": timedelta(hours=rt.cfg.fetch.max_age_hours)}
    return {}


class _StageRunner:
    """Runs one question's stage tasks in order.

    A stage's output comes from another run's rows when the run reuses them (a reprocess, or pinned
    evidence), else from its task; failures and a passed deadline become status rows.
    """

    def __init__(self, question: Question, rt: Runtime, reuse: RunReuse):
        self.question = question
        self.rt = rt
        self.reuse = reuse
        self.started = time.monotonic()
        self.result = QuestionResult(question)

    def __call__(self, stage: str, stage_task, upstream: StageOutput | None = None, **params) -> StageOutput:
        began = time.monotonic()
        cached, key, source = False, None, None
        stored = self.reuse.stored_output(stage, self.question)
        if stored is not None:
            (output, source), cached = stored, True
        elif began - self.started > self.rt.cfg.limits.deadline_s:
            output = stages.failed_output(stage, self.question, "the question's deadline passed",
                                          status="deadline_exceeded", upstream=upstream)
        else:
            # the key the task's cache policy computes too (Prefect does not hand it back), for the ledger
            inputs = {name: value for name, value in params.items() if name != "rt"}
            key = stages.cache_key(stage, {"question": self.question, **inputs}, self.rt)
            options = _task_options(stage, self.rt)
            if self.reuse.recompute(stage, self.question.id):  # a reprocess recomputes, cached or not
                options["refresh_cache"] = True
            if options:
                stage_task = stage_task.with_options(**options)
            state = stage_task(question=self.question, **params, return_state=True)
            if state.is_completed():
                output, cached = state.result(), state.name == "Cached"
            else:
                error = state.result(raise_on_failure=False)
                status = stages.failure_status(error) if isinstance(error, BaseException) else "failed"
                output = stages.failed_output(stage, self.question, error, status=status, upstream=upstream)
        self.result.outputs.append(output)
        self.result.ledger.append(StageRunRecord(
            stage=stage, status=output.status, error=output.error, cached=cached, source_run_id=source,
            seconds=round(time.monotonic() - began, 4), cache_key=key, n_rows=len(output.records),
            compute_seconds=output.compute_seconds,
        ))
        return output


@task(name="answer_question", task_run_name="question-{question.id}", cache_policy=NO_CACHE,
      persist_result=False)
def answer_question(question: Question, rt: Runtime, reuse: RunReuse) -> QuestionResult:
    """One question through the whole pipeline; each stage is its own cached, retried task."""
    run = _StageRunner(question, rt, reuse)
    # Stage tasks nested in this task would otherwise inherit its lazy transaction and persist their
    # results only when the whole question ends: a crash mid-question would lose every finished stage.
    with question_deadline(rt.cfg.limits.deadline_s, start=run.started), transaction(commit_mode=CommitMode.EAGER):
        return _answer(run, rt)


def _answer(run: _StageRunner, rt: Runtime) -> QuestionResult:
    plan = run("query_plan", plan_query, rt=rt)
    results = run("search", search_web, plan=plan, rt=rt)
    decisions = run("url_filter", filter_urls, upstream=results, results=results, rt=rt)
    pages = run("fetch", fetch_pages, decisions=decisions, rt=rt)
    sections = run("sections", split_sections, pages=pages, rt=rt)
    ranking = run("section_rank", rank_sections, upstream=sections, decisions=decisions, pages=pages,
                  sections=sections, rt=rt)
    sources = stages.build_sources(run.question, pages, sections, ranking, rt.cfg.generation)
    draft = run("draft", write_draft, sources=sources, rt=rt)
    refined = run("refine", refine_answer, draft=draft, rt=rt)
    answer_text, _ = stages.final_text(draft, refined)
    citations = run("citations", verify_citations, answer=answer_text, sources=sources, rt=rt)
    run("answer", assemble_answer, draft=draft, refined=refined, citations=citations, sources=sources, rt=rt)
    run.result.seconds = time.monotonic() - run.started
    return run.result


def write_question(warehouse: Warehouse, run_id: str, result: QuestionResult) -> None:
    """Persist every stage's rows, and its LLM calls (marked as reused when the stage was cached)."""
    qid = result.question.id
    calls = []
    for output, ledger in zip(result.outputs, result.ledger, strict=True):
        warehouse.write(output.table, output.records, run_id=run_id, stage=output.stage, question_id=qid)
        calls += [replace(c, cache_hit=True) if ledger.cached else c for c in output.calls]
    warehouse.write("llm_calls", calls, run_id=run_id, stage=None, question_id=qid)
    warehouse.write("stage_runs", result.ledger, run_id=run_id, stage=None, question_id=qid)


def _submit_windowed(questions: list[Question], rt: Runtime, reuse: RunReuse, window: int):
    """Submit questions so that at most ``window`` are in flight; yield each future as it completes."""
    pending = iter(questions)
    in_flight: dict[PrefectFuture, Question] = {}
    for question in pending:
        in_flight[answer_question.submit(question, rt, reuse)] = question
        if len(in_flight) >= window:
            break
    while in_flight:
        done = next(as_completed(list(in_flight)))
        question = in_flight.pop(done)
        nxt = next(pending, None)
        if nxt is not None:
            in_flight[answer_question.submit(nxt, rt, reuse)] = nxt
        yield question, done


def ensure_corpus_for(plan: RunPlan, log) -> None:
    """Build the local corpus on first use, when the config reads from it."""
    cfg = plan.cfg
    if "local" not in (cfg.backends.search, cfg.backends.fetch):
        return
    corpus = corpus_at(plan.data_root, cfg.corpus.name)
    if corpus.is_current():
        return
    if cfg.corpus.name != "docs":
        state = "was built by an older version" if corpus.exists() else "is not built"
        raise CorpusError(f"the corpus {cfg.corpus.name!r} {state}; run `hifirag corpus build --name ...`")
    from hifirag_core.corpus.build import build_default

    log.info("Building the local documentation corpus (once; under a minute) ...")
    built = build_default(corpus.root, corpus.blobs, log=log.info)
    log.info(f"Corpus built: {built.manifest()['pages']} pages")


def run_plan(plan: RunPlan) -> RunSummary:
    """Answer every question of a planned run and record it; the body of the flow."""
    log = get_run_logger()
    warehouse = Warehouse(plan.data_root)
    started_at = time.monotonic()
    ensure_corpus_for(plan, log)
    run_row = start_run(warehouse, plan)
    rt = build_runtime(plan.cfg, plan.data_root, plan.examples, evidence_from=plan.evidence_from)
    reuse = RunReuse(
        spec=plan.reuse,
        stored=StoredRun(warehouse, plan.reuse.run_id) if plan.reuse else None,
        evidence=StoredRun(warehouse, plan.evidence_from) if plan.evidence_from else None,
    )
    questions = list(plan.questions.questions)
    for note in (plan.note, plan.questions.note):
        if note:
            log.info(note)
    log.info(f"Run {plan.run_id}: {len(questions)} questions, variant {plan.cfg.variant}, "
             f"{plan.cfg.limits.concurrency} at a time; data in {plan.data_root}")
    answered = failed = computed = hits = paid = reused = 0
    window = plan.cfg.limits.concurrency
    for n, (question, future) in enumerate(_submit_windowed(questions, rt, reuse, window), 1):
        try:
            result: QuestionResult = future.result()
        except Exception as exc:  # the parent task itself broke: leave a row that says so
            failed_answer = stages.failed_output("answer", question, exc)
            result = QuestionResult(question, [failed_answer],
                                    [StageRunRecord(stage="answer", status="failed", error=failed_answer.error)])
        write_question(warehouse, plan.run_id, result)
        answer = result.answer
        ok = answer is not None and answer.status == "ok"
        answered += ok
        failed += not ok
        computed += sum(1 for c in result.cached if not c)
        hits += sum(result.cached)
        calls = [(c, cached) for o, cached in zip(result.outputs, result.cached, strict=True) for c in o.calls]
        paid += sum(1 for _, cached in calls if not cached)
        reused += sum(1 for _, cached in calls if cached)
        state = "answered" if ok else f"no answer ({answer.status if answer else 'failed'})"
        if ok and getattr(answer.records[0], "abstained", False):
            state = "abstained: the sources found do not answer it"
        log.info(f"[{n}/{len(questions)}] {question.id}: {state} in {result.seconds:.1f}s, "
                 f"{sum(result.cached)}/{len(result.cached)} stages from cache")
    notes = [plan.questions.note] if plan.questions.note else []
    if rt.guards is not None and rt.guards.budget.exhausted:
        spent = rt.guards.budget.summary()
        notes.append(f"the run's budget was spent ({spent}); later paid calls were not started and their "
                     "stages fell back (see stage_runs and llm_calls with status budget_exceeded)")
        log.warning(notes[-1])
    summary = RunSummary(
        run_id=plan.run_id, status="finished" if failed == 0 else "partial", n_questions=len(questions),
        n_answered=answered, n_failed=failed, wall_seconds=round(time.monotonic() - started_at, 2),
        stage_computations=computed, cache_hits=hits, llm_calls_paid=paid, llm_calls_reused=reused,
        data_root=str(plan.data_root), duckdb_path=str(warehouse.duckdb_path), notes=notes,
    )
    finish_run(warehouse, plan, run_row, summary)
    log.info(f"Run {plan.run_id} {summary.status}: {answered} answered, {failed} without an answer, "
             f"{summary.wall_seconds:.1f}s, {computed} stage computations, {hits} cache hits, "
             f"{paid} paid LLM calls ({reused} reused)")
    return summary


@flow(name="answer-questions", task_runner=ThreadPoolTaskRunner(max_workers=16), log_prints=False)
def answer_questions(
    questions: str,
    variant: str = "final",
    run_id: str | None = None,
    limit: int | None = None,
    sample: int | None = None,
    ids: list[str] | None = None,
    overrides: list[str] | None = None,
    data_root: str | None = None,
    fields: dict[str, str] | None = None,
    evidence_from: str | None = None,
) -> dict:
    """Answer a JSONL file of questions (MMU-RAGent or FAQ format) and persist every stage.

    ``overrides`` are ``key=value`` config settings (``url_filter.max_urls=4``); ``fields`` maps
    ``id``/``query``/``reference`` to a custom file's field names; ``evidence_from`` pins the query
    plans, search results and pages to another run's, so variants read identical evidence; the run id
    defaults to one derived from the questions and the config, so running the same thing again
    resumes or re-checks that run instead of starting another.
    """
    plan = plan_run(questions, variant=variant, overrides=overrides or (), run_id=run_id, limit=limit,
                    sample=sample, ids=ids, root=data_root, fields=fields, evidence_from=evidence_from)
    return run_plan(plan).to_dict()


@flow(name="answer-variants", log_prints=False)
def answer_variants(
    questions: str,
    variants: list[str],
    limit: int | None = None,
    sample: int | None = None,
    ids: list[str] | None = None,
    overrides: list[str] | None = None,
    data_root: str | None = None,
    evidence_from: str | None = None,
) -> list[dict]:
    """Several variants over the same questions, one run each; stages they share are computed once."""
    return [
        answer_questions(questions=questions, variant=variant, limit=limit, sample=sample, ids=ids,
                         overrides=overrides, data_root=data_root, evidence_from=evidence_from)
        for variant in variants
    ]

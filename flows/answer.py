"""The batch answer flow: every question through every stage, every stage's rows in the warehouse.

    question ─► query plan ─► search ─► URL filter ─► fetch ─► sections ─► section ranking
             ─► draft ─► refine ─► citations ─► answer

The stages, in this order, are the specs of ``hifirag_core.pipeline.specs.PIPELINE``. Questions run at most
``limits.concurrency`` at a time, on threads or on a Dask cluster (``flows.runners``), each as one
task that runs the stage tasks in order; a stage task that fails after its retries leaves its
fallback rows and the question goes on with what it has. When a question finishes, the flow writes
all of its stage rows (and the LLM calls behind them) through the warehouse's one writer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.futures import PrefectFuture, as_completed
from prefect.states import Failed
from prefect.task_runners import TaskRunner
from prefect.transactions import CommitMode, transaction
from prefect.utilities.annotations import quote

from flows.disk_full import no_space_seen, watch_for_no_space
from flows.environment import shared_api_url
from flows.runners import Runner, RunnerChoice, question_runner, shared_cluster
from hifirag_core.config import uses_real_backends
from hifirag_core.corpus.build import ensure_corpus
from hifirag_core.limits import Budget
from hifirag_core.pipeline.persistence import write_result
from hifirag_core.pipeline.plan import RunContext, RunPlan, plan_run
from hifirag_core.pipeline.repair import damage_in_sources
from hifirag_core.pipeline.runner import Execute, Executed, QuestionResult, QuestionRunner, StageObserver
from hifirag_core.pipeline.runs import RunSummary, finish_run, start_run
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.specs import ANSWER_STAGE, StageSpec, spec
from hifirag_core.pipeline.tally import RunTally
from hifirag_core.pipeline.trail import Trail
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord, StageRunRecord
from hifirag_core.store.disk import DiskFullError, disk_full, ensure_free, is_disk_full
from hifirag_core.store.warehouse import Warehouse
from hifirag_core.web.fetch_health import fetch_warnings
from tasks.shared_limits import prefect_ledger
from tasks.stage_tasks import STAGE_TASKS, resolve


def _stage_tasks(question: Question, ctx: RunContext, rt: Runtime) -> Execute:
    """The runner's ``execute`` in the flow: each stage as its Prefect task (cached under the runner's key,
    retried, its result persisted); a result the disk had no room for ends as ``DiskFullError``."""

    def execute(stage: StageSpec, params: dict[str, Any], key: str, round: int) -> Executed:
        no_space_seen()  # what an earlier task of this thread reported is not this stage's
        # quoted: Prefect would otherwise walk every record of the earlier stages' outputs, looking
        # for futures to wait on, twice per task (a stage's inputs are finished outputs, never futures)
        state = _task(stage, question, rt, round)(question=question, ctx=ctx, params=quote(params),
                                                  cache_key=key, round=round, return_state=True)
        if no_space_seen():  # Prefect could not store its result (it logs that and carries on): stop here
            raise disk_full(results_folder())
        try:
            if state.is_completed():
                return Executed(state.result(), cached=state.name == "Cached")
            error = state.result(raise_on_failure=False)
        except Exception as exc:
            if is_disk_full(exc):
                raise disk_full(results_folder(), exc) from None
            raise
        if is_disk_full(error):  # its result could not be stored: the runner stops the question
            raise disk_full(results_folder(), error) from None
        return Executed(error=error)

    return execute


def _task(stage: StageSpec, question: Question, rt: Runtime, round: int):
    """The stage's task with this step's options: a live result expires, and a reprocess recomputes."""
    options: dict = {}
    hours = stage.max_age_hours(rt.cfg)
    if hours is not None:  # a live result expires; its age is part of the cache key too, so a shorter
        options["cache_expiration"] = timedelta(hours=hours)  # age applies at once
    if rt.reuse and rt.reuse.recompute(stage.name, question.id, round):
        options["refresh_cache"] = True  # a reprocess recomputes, cached or not
    stage_task = STAGE_TASKS[stage.name]
    return stage_task.with_options(**options) if options else stage_task


@task(name="answer_question", task_run_name="question-{question.id}", cache_policy=NO_CACHE,
      persist_result=False)
def answer_question(question: Question, ctx: RunContext, observer: StageObserver | None = None) -> QuestionResult:
    """One question through the whole pipeline (``QuestionRunner``); each stage is its own cached, retried task.

    ``observer`` (threads only: it does not cross processes) sees each stage's output as it finishes.
    """
    watch_for_no_space()
    rt = resolve(ctx)
    runner = QuestionRunner(question, rt, _stage_tasks(question, ctx, rt), observer)
    # Stage tasks nested in this task would otherwise inherit its lazy transaction and persist their
    # results only when the whole question ends: a crash mid-question would lose every finished stage.
    with transaction(commit_mode=CommitMode.EAGER):
        return runner.run()


def _submit_windowed(questions: list[Question], ctx: RunContext, runner: TaskRunner, window: int):
    """Submit questions so that at most ``window`` are in flight; yield each future as it completes."""
    pending = iter(questions)
    in_flight: dict[PrefectFuture, Question] = {}

    def submit(question: Question) -> None:
        in_flight[runner.submit(answer_question, parameters={"question": question, "ctx": ctx})] = question

    for question in pending:
        submit(question)
        if len(in_flight) >= window:
            break
    while in_flight:
        done = next(as_completed(list(in_flight)))
        question = in_flight.pop(done)
        nxt = next(pending, None)
        if nxt is not None:
            submit(nxt)
        yield question, done


def run_plan(plan: RunPlan, choice: RunnerChoice | None = None) -> RunSummary:
    """Answer every question of a planned run and record it; the body of the flows below.

    The local corpus must be built already: the command line builds it while Prefect's server starts,
    and a flow started with plain parameters builds it after planning (``ensure_corpus``).
    """
    choice = choice or RunnerChoice()
    log = get_run_logger()
    ensure_free(plan.data_root, plan.cfg.limits.min_free_mb)
    warehouse = Warehouse(plan.data_root)
    started_at = time.monotonic()
    run_row = start_run(warehouse, plan)
    ctx = plan.context(shared_limits=choice.shares_limits or shared_api_url() is not None)
    questions = list(plan.questions.questions)
    for note in (plan.note, plan.questions.note):
        if note:
            log.info(note)
    window = plan.cfg.limits.concurrency
    where = "in threads" if choice.kind == "threads" else (
        f"on the Dask cluster at {choice.dask_address}" if choice.dask_address
        else f"on a local Dask cluster of {choice.dask_workers} processes")
    log.info(f"Run {plan.run_id}: {len(questions)} questions, variant {plan.cfg.variant}, {window} at a time "
             f"{where}; data in {plan.data_root}")
    # damage in a run this one takes rows from never stops it: said once, and those stages are computed again
    damaged = damage_in_sources(warehouse, [plan.reuse.run_id if plan.reuse else None, plan.evidence_from])
    for line in damaged:
        log.warning(line)
    tally = RunTally()
    fetched: dict[str, list] = {}  # each question's fetch rows, for the crawl warnings
    with question_runner(choice, window) as runner:
        for n, (question, future) in enumerate(_submit_windowed(questions, ctx, runner, window), 1):
            try:
                result: QuestionResult = future.result()
            except Exception as exc:  # the question task itself broke: leave a row that says so
                if is_disk_full(exc):
                    raise disk_full(plan.data_root, exc) from None
                failed_answer = spec(ANSWER_STAGE).failed(question, Trail(question), exc)
                result = QuestionResult(question, [failed_answer], [
                    StageRunRecord(stage=ANSWER_STAGE, status=failed_answer.status, error=failed_answer.error)])
            if result.disk_full:
                raise DiskFullError(result.disk_full)
            write_result(warehouse, plan.run_id, result)
            tally.add(result.outputs, result.cached)
            fetched[question.id] = [r for o in result.outputs for r in o.records if isinstance(r, PageRecord)]
            answer = result.answer
            ok = answer is not None and answer.status == "ok"
            state = "answered" if ok else f"no answer ({answer.status if answer else 'failed'})"
            if ok and getattr(answer.records[0], "abstained", False):
                state = "abstained: the sources found do not answer it"
            rounds = max((o.round for o in result.outputs), default=0)
            again = f", after {rounds} follow-up round{'s' if rounds > 1 else ''}" if rounds else ""
            log.info(f"[{n}/{len(questions)}] {question.id}: {state}{again} in {result.seconds:.1f}s, "
                     f"{sum(result.cached)}/{len(result.cached)} stages from cache")
    notes = [plan.questions.note] if plan.questions.note else []
    notes += damaged
    for warning in [*tally.lines(), *fetch_warnings(fetched)]:
        notes.append(warning)
        log.warning(warning)
    budget = run_budget(ctx)
    if budget is not None and budget.exhausted:
        notes.append(f"the run's budget was spent ({budget.summary()}); later paid calls were not started and "
                     "their stages fell back (see stage_runs and llm_calls with status budget_exceeded)")
        log.warning(notes[-1])
    summary = RunSummary(
        run_id=plan.run_id, status="finished" if tally.unanswered == 0 else "partial", n_questions=len(questions),
        n_answered=tally.answered, n_failed=tally.unanswered, wall_seconds=round(time.monotonic() - started_at, 2),
        stage_computations=tally.computed, cache_hits=tally.cache_hits, llm_calls_paid=tally.paid,
        llm_calls_reused=tally.reused, llm_calls_unbilled=tally.unbilled, search_calls=tally.searched,
        cost_usd=round(tally.cost_usd, 6), unanswered=dict(tally.reasons),
        backend_errors=dict(tally.backend_errors), n_abstained=tally.abstained, n_looked_again=tally.looked_again,
        follow_up_rounds=tally.rounds, data_root=str(plan.data_root),
        duckdb_path=str(warehouse.duckdb_path), notes=notes,
    )
    finish_run(warehouse, plan, run_row, summary)
    abstained = f" ({tally.abstained} of them abstained)" if tally.abstained else ""
    log.info(f"Run {plan.run_id} {summary.status}: {tally.answered} answered{abstained}, {tally.unanswered} without an answer, "
             f"{summary.wall_seconds:.1f}s, {tally.computed} stage computations, {tally.cache_hits} cache hits, "
             f"{tally.paid} paid LLM calls ({tally.reused} reused, {tally.unbilled} unbilled), "
             f"{tally.searched} searches sent, ${tally.cost_usd:.4f}")
    return summary


def results_folder() -> Path:
    """Where the stage tasks persist their results (the stage cache)."""
    from prefect.settings import get_current_settings

    return Path(get_current_settings().results.local_storage_path)


def run_budget(ctx: RunContext) -> Budget | None:
    """The run's budget as the flow sees it: the server's totals when its workers share them."""
    if not uses_real_backends(ctx.cfg):
        return None
    if ctx.shared_limits:
        return Budget(usd=ctx.cfg.limits.budget_usd, tokens=ctx.cfg.limits.budget_tokens, ledger=prefect_ledger(ctx))
    guards = resolve(ctx).guards
    return guards.budget if guards is not None else None


def _or_disk_full(work: Callable[[], Any]) -> Any:
    """A flow's return value; a full disk ends the flow Failed with its one line instead of a traceback (the
    caller gets ``FailedRun`` with that line: ``flows.cli.common.in_prefect`` prints it)."""
    try:
        return work()
    except DiskFullError as exc:
        return Failed(message=str(exc))


def run_plans(plans: list[RunPlan], choice: RunnerChoice) -> list[RunSummary]:
    """Several planned runs in turn; with the dask runner and no address, one LocalCluster serves them all."""
    with shared_cluster(choice, max((p.cfg.limits.concurrency for p in plans), default=1)) as shared:
        return [run_plan(plan, shared) for plan in plans]


@flow(name="answer-questions", log_prints=False)
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
    runner: Runner = "threads",
    dask_address: str | None = None,
    dask_workers: int = 2,
    profile: str | None = None,
    config_file: str | None = None,
) -> dict:
    """Answer a JSONL file of questions (MMU-RAGent or FAQ format) and persist every stage.

    ``profile`` names the backends in one word (``offline``, ``gemini``, ``openai:MODEL@URL``,
    ``llama-cpp:MODEL@URL``); ``config_file`` is a TOML settings file (default ``$HIFIRAG_CONFIG`` on the
    worker); precedence: defaults, the file, the profile, the variant, ``overrides``.

    ``overrides`` are ``key=value`` config settings (``url_filter.max_urls=4``); ``fields`` maps
    ``id``/``query``/``reference`` to a custom file's field names; ``evidence_from`` pins the query
    plans, search results and pages to another run's, so variants read identical evidence; the run id
    defaults to one derived from the questions and the config, so running the same thing again
    resumes or re-checks that run instead of starting another. ``runner`` is ``threads`` (this
    process) or ``dask`` (a LocalCluster of ``dask_workers`` processes, or the scheduler at
    ``dask_address``); both write the same rows.
    """
    choice = RunnerChoice(runner, dask_address, dask_workers)
    plan = plan_run(questions, variant=variant, overrides=overrides or (), run_id=run_id, limit=limit,
                    sample=sample, ids=ids, root=data_root, fields=fields, evidence_from=evidence_from,
                    profile=profile, config_file=config_file)
    ensure_corpus(plan.cfg, plan.data_root, get_run_logger().info)
    return _or_disk_full(lambda: run_plan(plan, choice).to_dict())


@flow(name="answer-variants", log_prints=False)
def answer_variants(
    questions: str,
    variants: list[str],
    limit: int | None = None,
    sample: int | None = None,
    ids: list[str] | None = None,
    overrides: list[str] | None = None,
    data_root: str | None = None,
    fields: dict[str, str] | None = None,
    evidence_from: str | None = None,
    runner: Runner = "threads",
    dask_address: str | None = None,
    dask_workers: int = 2,
    profile: str | None = None,
    config_file: str | None = None,
) -> list[dict]:
    """Several variants over the same questions, one run each; stages they share are computed once.

    With the dask runner and no address, one LocalCluster serves every variant.
    """
    plans = [plan_run(questions, variant=variant, overrides=overrides or (), limit=limit, sample=sample, ids=ids,
                      root=data_root, fields=fields, evidence_from=evidence_from, profile=profile,
                      config_file=config_file) for variant in variants]
    for plan in plans:
        ensure_corpus(plan.cfg, plan.data_root, get_run_logger().info)
    return _or_disk_full(lambda: [s.to_dict() for s in run_plans(plans, RunnerChoice(runner, dask_address, dask_workers))])


@flow(name="answer-runs", log_prints=False, validate_parameters=False)
def answer_runs(
    plans: list[RunPlan],
    runner: Runner = "threads",
    dask_address: str | None = None,
    dask_workers: int = 2,
) -> list[dict]:
    """Runs planned, checked and given their corpus by the command line (``hifirag run``, ``demo``,
    ``reprocess``): each plan is answered as made, one run per plan."""
    return _or_disk_full(lambda: [s.to_dict() for s in run_plans(plans, RunnerChoice(runner, dask_address, dask_workers))])

"""One Prefect task per stage, made from its spec in ``hifirag_core.pipeline.specs``.

A stage task receives the question, the run's serializable ``RunContext`` and the parameters its
spec gathered from earlier stages; it resolves the context into this process's live runtime
(built once per process) and calls the stage function. The flow passes those parameters quoted
(finished outputs, never futures: Prefect need not walk their records) and the cache key the question
runner computed (``StageSpec.cache_key``: inputs, config slice, model identity, version), which is the
task's cache key too, so identical work is never paid twice, across runs, variants and processes.
From the spec it takes:

* its retries: stages that do IO retry twice with backoff, and only on ``TransientError`` (a
  backend that was down or rate-limited), never on a bug in the stage's own code.

Results are persisted (they are the stage cache) and read back from disk rather than kept in
Prefect's in-memory LRU: that LRU is shared by a flow's threads and, past 1,000 stage results,
concurrent evictions raised ``KeyError`` on a cache hit (a 217-question rerun lost an answer).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.client.schemas.objects import TaskRun
from prefect.context import TaskRunContext
from prefect.states import State

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.plan import RunContext
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.pipeline.specs import PIPELINE, StageSpec
from hifirag_core.pipeline.wiring import runtime_for
from hifirag_core.questions import Question
from hifirag_core.types import ChatTurn, Conversation
from tasks.shared_limits import prefect_ledger


def resolve(ctx: RunContext) -> Runtime:
    """This process's runtime for the run (rate limits and budget on the Prefect server when shared)."""
    return runtime_for(ctx, ledger=prefect_ledger)


def _cache_key(stage: StageSpec) -> Callable[[TaskRunContext, dict[str, Any]], str]:
    def key(_context: TaskRunContext, parameters: dict[str, Any]) -> str:
        # computed once, by the question runner (``hifirag_core.pipeline.runner``), which also puts it in its ledger
        if not parameters.get("cache_key"):
            raise ValueError(f"the {stage.name} task needs the cache key its question runner computed")
        return parameters["cache_key"]

    return key


def _retry_condition(stage: StageSpec) -> Callable[[Task, TaskRun, State], bool]:
    def transient_only(_task: Task, _task_run: TaskRun, state: State) -> bool:
        return stage.retry.should_retry(state.result(raise_on_failure=False))

    return transient_only


def stage_task(stage: StageSpec) -> Task[..., StageOutput]:
    """The Prefect task of one stage."""

    def run_stage(question: Question, ctx: RunContext, params: dict[str, Any],
                  cache_key: str | None = None, round: int = 0) -> StageOutput:
        return stage.run(question, params, resolve(ctx), round)

    run_stage.__doc__ = stage.summary
    retries: dict[str, Any] = {}
    if stage.retry.retries:
        retries = {"retries": stage.retry.retries, "retry_delay_seconds": list(stage.retry.delays_s),
                   "retry_condition_fn": _retry_condition(stage)}
    return task(run_stage, name=stage.name, task_run_name=f"{stage.name}-{{question.id}}",
                cache_key_fn=_cache_key(stage), persist_result=True, cache_result_in_memory=False, **retries)


STAGE_TASKS: dict[str, Task[..., StageOutput]] = {stage.name: stage_task(stage) for stage in PIPELINE}


def _results_cached_before_the_regrouping() -> None:
    """Let stage results cached before ``hifirag_core`` was grouped into packages load: their pickles name
    the modules their classes lived in then (``hifirag_core.stages``, ``hifirag_core.backends.base``), and
    without these names an upgrade would recompute, and pay for, every cached stage once."""
    moved = {"hifirag_core.stages": {"StageOutput": StageOutput},
             "hifirag_core.backends.base": {"Conversation": Conversation, "ChatTurn": ChatTurn}}
    for name, classes in moved.items():
        if name not in sys.modules:
            module = types.ModuleType(name, "Where stage results cached before 2026-12 find their classes.")
            module.__dict__.update(classes)
            sys.modules[name] = module


_results_cached_before_the_regrouping()

"""Stage task: query_plan."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="query_plan",
    task_run_name="query_plan-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("query_plan"),
    **STORED_RESULT,
)
def plan_query(question: Question, rt: Runtime) -> stages.StageOutput:
    """Rewrite the question into search queries (prompt A.1)."""
    return stages.plan_query(question, rt)

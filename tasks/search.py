"""Stage task: search."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="search",
    task_run_name="search-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("search"),
    **STORED_RESULT,
)
def search_web(question: Question, plan: stages.StageOutput, rt: Runtime) -> stages.StageOutput:
    """Run the query plan against the search backend."""
    return stages.search(question, plan, rt)

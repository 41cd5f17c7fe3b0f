"""Stage task: url_filter."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="url_filter",
    task_run_name="url_filter-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("url_filter"),
    **STORED_RESULT,
)
def filter_urls(question: Question, results: stages.StageOutput, rt: Runtime) -> stages.StageOutput:
    """Keep the search results worth reading, judged on title and snippet (prompt A.2)."""
    return stages.filter_urls(question, results, rt)

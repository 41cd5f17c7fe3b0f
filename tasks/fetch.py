"""Stage task: fetch."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="fetch",
    task_run_name="fetch-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("fetch"),
    **STORED_RESULT,
)
def fetch_pages(question: Question, decisions: stages.StageOutput, rt: Runtime) -> stages.StageOutput:
    """Fetch the kept URLs (pages, or Reddit threads) into the blob store."""
    return stages.fetch_pages(question, decisions, rt)

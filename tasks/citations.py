"""Stage task: citations."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.backends.base import SourceDoc
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="citations",
    task_run_name="citations-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("citations"),
    **STORED_RESULT,
)
def verify_citations(
    question: Question, answer: str | None, sources: list[SourceDoc], rt: Runtime
) -> stages.StageOutput:
    """Keep only the sources that support the answer (prompt A.5)."""
    return stages.verify_citations(question, answer, sources, rt)

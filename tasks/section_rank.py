"""Stage task: section_rank."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import IO_RETRIES, IO_RETRY_DELAYS, STORED_RESULT, stage_cache_key


@task(
    name="section_rank",
    task_run_name="section_rank-{question.id}",
    retries=IO_RETRIES,
    retry_delay_seconds=IO_RETRY_DELAYS,
    cache_key_fn=stage_cache_key("section_rank"),
    **STORED_RESULT,
)
def rank_sections(
    question: Question,
    decisions: stages.StageOutput,
    pages: stages.StageOutput,
    sections: stages.StageOutput,
    rt: Runtime,
) -> stages.StageOutput:
    """Rank each page's sections from heading + first 200 characters (prompt A.3)."""
    return stages.rank_sections(question, decisions, pages, sections, rt)

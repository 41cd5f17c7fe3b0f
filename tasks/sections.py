"""Stage task: sections."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import STORED_RESULT, stage_cache_key


@task(
    name="sections",
    task_run_name="sections-{question.id}",
    cache_key_fn=stage_cache_key("sections"),
    **STORED_RESULT,
)
def split_sections(question: Question, pages: stages.StageOutput, rt: Runtime) -> stages.StageOutput:
    """Parse each fetched page into heading-scoped Markdown sections."""
    return stages.split_sections(question, pages, rt)

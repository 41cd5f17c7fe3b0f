"""Stage task: draft."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.backends.base import SourceDoc
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import STORED_RESULT, stage_cache_key


@task(
    name="draft",
    task_run_name="draft-{question.id}",
    cache_key_fn=stage_cache_key("draft"),
    **STORED_RESULT,
)
def write_draft(question: Question, sources: list[SourceDoc], rt: Runtime) -> stages.StageOutput:
    """Generation pass 1"""
    return stages.write_draft(question, sources, rt)

"""Stage task: refine."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import STORED_RESULT, stage_cache_key


@task(
    name="refine",
    task_run_name="refine-{question.id}",
    cache_key_fn=stage_cache_key("refine"),
    **STORED_RESULT,
)
def refine_answer(question: Question, draft: stages.StageOutput, rt: Runtime) -> stages.StageOutput:
    """Generation pass 2"""
    return stages.refine_answer(question, draft, rt)

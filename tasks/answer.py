"""Stage task: answer."""

from __future__ import annotations

from prefect import task

from hifirag_core import stages
from hifirag_core.backends.base import SourceDoc
from hifirag_core.questions import Question
from hifirag_core.runtime import Runtime
from tasks._cache import STORED_RESULT, stage_cache_key


@task(
    name="answer",
    task_run_name="answer-{question.id}",
    cache_key_fn=stage_cache_key("answer"),
    **STORED_RESULT,
)
def assemble_answer(
    question: Question,
    draft: stages.StageOutput,
    refined: stages.StageOutput,
    citations: stages.StageOutput,
    sources: list[SourceDoc],
    rt: Runtime,
) -> stages.StageOutput:
    """Put the answer together: the refined text (or the draft), the URLs its citations kept, and whether
    the sources answer the question."""
    return stages.assemble_answer(question, draft, refined, citations, sources, rt)

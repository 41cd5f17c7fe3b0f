"""Reprocess: a new run derived from a finished one, recomputing from a named stage on.

Ready for the Prefect UI: the parameters are typed, so the form offers the stage names. Stages
before ``from_stage``, and every stage of the questions not chosen, come from the parent run's
rows; the new run is complete in every stage view and records its parent and overrides.
"""

from __future__ import annotations

from typing import Literal

from prefect import flow
from prefect.task_runners import ThreadPoolTaskRunner

from flows.answer import run_plan
from hifirag_core.runs import plan_reprocess

Stage = Literal["query_plan", "search", "url_filter", "fetch", "sections", "section_rank", "draft", "refine",
                "citations", "answer"]


@flow(name="reprocess", task_runner=ThreadPoolTaskRunner(max_workers=16), log_prints=False)
def reprocess(
    run_id: str,
    from_stage: Stage,
    questions: list[str] | None = None,
    overrides: list[str] | None = None,
    new_run_id: str | None = None,
    data_root: str | None = None,
) -> dict:
    """Recompute ``run_id`` from ``from_stage`` on (for ``questions``, or all), with ``overrides``
    (``key=value`` settings such as ``models.filter=gemini-2.5-pro``)."""
    plan = plan_reprocess(run_id, from_stage=from_stage, question_ids=questions, overrides=overrides or (),
                          run_id=new_run_id, root=data_root)
    return run_plan(plan).to_dict()

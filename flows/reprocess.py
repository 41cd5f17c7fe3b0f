"""Reprocess: a new run derived from a finished one, recomputing from a named stage on.

Ready for the Prefect UI: the parameters are typed, so the form offers the stage names (taken from
the pipeline's specs). Stages before ``from_stage``, and every stage of the questions not chosen,
come from the parent run's rows; the new run is complete in every stage view and records its parent
and overrides.
"""

from __future__ import annotations

from typing import Literal

from prefect import flow, get_run_logger

from flows.answer import run_plan
from flows.runners import Runner, RunnerChoice
from hifirag_core.corpus.build import ensure_corpus
from hifirag_core.pipeline.plan import plan_reprocess
from hifirag_core.pipeline.specs import STAGE_NAMES

Stage = Literal[STAGE_NAMES]  # type: ignore[valid-type]  (one literal per stage, in pipeline order)


@flow(name="reprocess", log_prints=False)
def reprocess(
    run_id: str,
    from_stage: Stage,
    questions: list[str] | None = None,
    overrides: list[str] | None = None,
    new_run_id: str | None = None,
    data_root: str | None = None,
    runner: Runner = "threads",
    dask_address: str | None = None,
    dask_workers: int = 2,
    profile: str | None = None,
) -> dict:
    """Recompute ``run_id`` from ``from_stage`` on (for ``questions``, or all), with ``overrides``
    (``key=value`` settings such as ``models.filter=gemini-2.5-pro``), on threads or a Dask cluster."""
    plan = plan_reprocess(run_id, from_stage=from_stage, question_ids=questions, overrides=overrides or (),
                          run_id=new_run_id, root=data_root, profile=profile)
    ensure_corpus(plan.cfg, plan.data_root, get_run_logger().info)
    return run_plan(plan, RunnerChoice(runner, dask_address, dask_workers)).to_dict()

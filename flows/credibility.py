"""The source-aware reranking experiment (second paper) as a flow: how much a source prior helps or
hurts retrieval, swept over its strength lambda and over how strongly corruption follows source type.

The experiment's steps live in ``hifirag_core.evaluation.credibility_experiment``; this flow runs them as one
task (vectors cached on disk by content, so a rerun embeds nothing), renders the Markdown summary
and the plot, writes every result table through the warehouse, and leaves the summary as a
Prefect artifact.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from hifirag_core.config import parse_overrides
from hifirag_core.evaluation.credibility_experiment import (
    CredibilityExperimentConfig,
    ExperimentResult,
    run_experiment,
)
from hifirag_core.evaluation.credibility_report import write_report
from hifirag_core.records import RunRecord, utcnow
from hifirag_core.records.credibility import STAGE
from hifirag_core.resources import data_root as resolve_data_root
from hifirag_core.retrieval.embeddings import Embedder
from hifirag_core.store.warehouse import Warehouse


@task(name="credibility_experiment", cache_policy=NO_CACHE, persist_result=False)
def run_credibility_experiment(config: CredibilityExperimentConfig, root: Path) -> ExperimentResult:
    """Build the corpora, embed them (cached), run the sweep, score and summarise it."""
    return run_experiment(config, Embedder(root / "cache" / "vectors.sqlite"))


@task(name="credibility_report", cache_policy=NO_CACHE, persist_result=False)
def write_credibility_report(result: ExperimentResult, out_dir: Path) -> tuple[Path, Path]:
    """The Markdown summary and the sweep plot."""
    return write_report(result, out_dir)


def write_experiment(warehouse: Warehouse, result: ExperimentResult, settings: list[str], started: datetime) -> str:
    """Every result table under one run id, and a row in ``runs`` so ``hifirag runs`` lists it."""
    run_id = f"credibility-{result.experiment_id}"
    for table, rows in result.records.items():
        warehouse.write(table, rows, run_id=run_id, stage=STAGE)
    n_queries = sum(result.n_queries.values())
    warehouse.write("runs", [RunRecord(
        run_id=run_id, status="finished", variant="credibility-experiment", dataset="medquad",
        config_json=result.config.model_dump_json(), config_hash=result.experiment_id,
        overrides_json=json.dumps(settings) if settings else None,
        started_at=started, finished_at=utcnow(), n_questions=n_queries, n_answered=n_queries,
        n_failed=0, wall_seconds=round(sum(result.timings.values()), 2),
        note=f"default strength chosen on the tune half: lambda = {result.choice.strength:g}",
    )], run_id=run_id, stage="run")
    warehouse.compact_run(run_id)
    warehouse.refresh_duckdb_file()
    return run_id


@flow(name="credibility-experiment", log_prints=False)
def credibility_experiment(settings: list[str] | None = None, data_root: str | None = None,
                           out_dir: str | None = None) -> dict:
    """Run the experiment; ``settings`` are ``key=value`` fields of ``CredibilityExperimentConfig``
    (``n_queries=600``, ``strengths=[0, 0.5, 1]``, ``credibility.smoothing_alpha=0.05``)."""
    log = get_run_logger()
    started = utcnow()
    root = resolve_data_root(data_root)
    config = CredibilityExperimentConfig.model_validate(parse_overrides(settings or []))
    out = Path(out_dir) if out_dir else root / "reports" / "credibility"
    result = run_credibility_experiment(config, root)
    summary_path, plot_path = write_credibility_report(result, out)
    run_id = write_experiment(Warehouse(root), result, settings or [], started)
    create_markdown_artifact(markdown=summary_path.read_text(encoding="utf-8"), key="credibility-summary",
                             description=f"Source-aware reranking experiment {result.experiment_id}")
    log.info(f"Experiment {result.experiment_id}: {sum(result.n_queries.values())} queries over {result.n_docs} "
             f"documents; default strength {result.choice.strength:g}; summary {summary_path}, plot {plot_path}, "
             f"tables under run {run_id}")
    return {"run_id": run_id, "experiment_id": result.experiment_id, "summary": str(summary_path),
            "plot": str(plot_path), "n_queries": result.n_queries, "n_docs": result.n_docs,
            "default_strength": result.choice.strength, "timings": result.timings}

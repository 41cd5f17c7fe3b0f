"""The source-aware reranking experiment (second paper) as a flow: MedQuAD health documents plus
lower-credibility and injected adversarial copies, four systems (similarity; x prior; + smoothing;
+ oracle update), metrics with paired bootstrap intervals and a sensitivity sweep.

The experiment's steps live in ``hifirag_core.credibility.experiment``; this flow runs them as a
task (vectors cached on disk by content, so a rerun embeds nothing), writes every result table
through the warehouse, and leaves the Markdown summary as a Prefect artifact.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from hifirag_core.config import parse_overrides
from hifirag_core.credibility.experiment import CredibilityExperimentConfig, ExperimentResult, run_experiment
from hifirag_core.credibility.records import STAGE
from hifirag_core.embeddings import Embedder
from hifirag_core.records import RunRecord, utcnow
from hifirag_core.runs import data_root as resolve_data_root
from hifirag_core.warehouse import Warehouse


@task(name="credibility_experiment", cache_policy=NO_CACHE, persist_result=False)
def run_credibility_experiment(config: CredibilityExperimentConfig, out_dir: Path, root: Path) -> ExperimentResult:
    """Build the corpus, embed it (cached), run and score every system, write the report files."""
    return run_experiment(config, out_dir, Embedder(root / "cache" / "vectors.sqlite"))


def write_experiment(warehouse: Warehouse, result: ExperimentResult, config: CredibilityExperimentConfig,
                     settings: list[str], started: datetime) -> str:
    """Every result table under one run id, and a row in ``runs`` so ``hifirag runs`` lists it."""
    run_id = f"credibility-{result.experiment_id}"
    for table, rows in result.records.items():
        warehouse.write(table, rows, run_id=run_id, stage=STAGE)
    warehouse.write("runs", [RunRecord(
        run_id=run_id, status="finished", variant="credibility-experiment", dataset="medquad",
        config_json=config.model_dump_json(), config_hash=result.experiment_id,
        overrides_json=json.dumps(settings) if settings else None,
        started_at=started, finished_at=utcnow(), n_questions=result.n_queries, n_answered=result.n_queries,
        n_failed=0, wall_seconds=round(sum(result.timings.values()), 2),
        note="oracle feedback (relevance labels) drives the weight-update systems",
    )], run_id=run_id, stage="run")
    warehouse.compact_run(run_id)
    warehouse.refresh_duckdb_file()
    return run_id


@flow(name="credibility-experiment", log_prints=False)
def credibility_experiment(settings: list[str] | None = None, data_root: str | None = None,
                           out_dir: str | None = None) -> dict:
    """Run the experiment; ``settings`` are ``key=value`` fields of ``CredibilityExperimentConfig``
    (``n_queries=300``, ``credibility.smoothing_alpha=0.05``)."""
    log = get_run_logger()
    started = utcnow()
    root = resolve_data_root(data_root)
    config = CredibilityExperimentConfig.model_validate(parse_overrides(settings or []))
    out = Path(out_dir) if out_dir else root / "reports" / "credibility"
    result = run_credibility_experiment(config, out, root)
    run_id = write_experiment(Warehouse(root), result, config, settings or [], started)
    summary = result.summary_path.read_text(encoding="utf-8")
    create_markdown_artifact(markdown=summary, key="credibility-summary",
                             description=f"Source-aware reranking experiment {result.experiment_id}")
    log.info(f"Experiment {result.experiment_id}: {result.n_queries} queries over {result.n_docs} documents; "
             f"summary {result.summary_path}, plot {result.plot_path}, tables under run {run_id}")
    return {"run_id": run_id, "experiment_id": result.experiment_id, "summary": str(result.summary_path),
            "plot": str(result.plot_path), "n_queries": result.n_queries, "n_docs": result.n_docs,
            "timings": result.timings}

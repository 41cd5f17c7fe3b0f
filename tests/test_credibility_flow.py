"""The credibility experiment as a flow: report files, warehouse tables, a row in runs."""

from __future__ import annotations

import pytest

from flows.environment import stage_cache_at
from hifirag_core.warehouse import Warehouse

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.shared_data]


def test_a_small_experiment_through_the_flow(tmp_path):
    from flows.credibility import credibility_experiment

    root = tmp_path / "data"
    settings = ["max_source_docs=80", "n_queries=12", "n_distractor_copies=10", "bootstrap_resamples=200",
                "sweep_scales=[0, 1, 2]"]
    with stage_cache_at(root):
        result = credibility_experiment(settings=settings, data_root=str(root))
    w = Warehouse(root)
    systems = {s for (s,) in w.query("SELECT DISTINCT system FROM credibility_summary WHERE run_id = ?",
                                     [result["run_id"]]).rows}
    assert {"similarity", "prior", "prior_smoothing", "prior_smoothing_update"} <= systems
    (n,) = w.query("SELECT count(DISTINCT query) FROM credibility_query_results WHERE run_id = ?",
                   [result["run_id"]]).rows[0]
    assert n == 12
    (variant,) = w.query("SELECT variant FROM runs WHERE run_id = ?", [result["run_id"]]).rows[0]
    assert variant == "credibility-experiment"
    hits = dict(w.query("SELECT system, mean FROM credibility_summary WHERE run_id = ? AND labels = 'topical' "
                        "AND metric = 'adversarial_hit_rate'", [result["run_id"]]).rows)
    assert hits["prior"] <= hits["similarity"]
    summary = (root / "reports" / "credibility").glob("*.md")
    assert any("oracle" in p.read_text().lower() for p in summary)
    assert any((root / "reports" / "credibility").glob("*.png"))

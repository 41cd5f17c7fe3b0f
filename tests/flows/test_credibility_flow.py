"""The credibility experiment as a flow: report files, warehouse tables, a row in runs."""

from __future__ import annotations

import pytest

from flows.environment import stage_cache_at
from hifirag_core.store.warehouse import Warehouse

pytestmark = [pytest.mark.usefixtures("prefect_harness"), pytest.mark.shared_data]


def test_a_small_experiment_through_the_flow(tmp_path, monkeypatch):
    import flows.credibility
    from tests.support.credibility_helpers import HashingEncoder

    # the flow's own code path with a model-free encoder: the MiniLM path is tested in test_credibility_experiment
    monkeypatch.setattr(flows.credibility, "Embedder", lambda path: HashingEncoder())
    root = tmp_path / "data"
    settings = ["n_queries=12", "n_background=10", "bootstrap_resamples=200", "correlations=[0, 0.5, 1]",
                "strengths=[0, 1]"]
    with stage_cache_at(root):
        result = flows.credibility.credibility_experiment(settings=settings, data_root=str(root))
    w = Warehouse(root)
    run = [result["run_id"]]
    systems = {s for (s,) in w.query("SELECT DISTINCT system FROM credibility_summary WHERE run_id = ?", run).rows}
    assert systems == {"similarity", "prior", "prior_smoothing", "prior_update"}
    (n,) = w.query("SELECT count(DISTINCT question_id) FROM credibility_query_results WHERE run_id = ?", run).rows[0]
    assert n == 12
    (cells,) = w.query("SELECT count(DISTINCT (correlation, strength, system)) FROM credibility_query_results "
                       "WHERE run_id = ?", run).rows[0]
    assert cells == 3 * (1 + 3)
    (types,) = w.query("SELECT count(DISTINCT source_type) FROM credibility_rates WHERE run_id = ?", run).rows[0]
    assert types == 7
    (variant, note) = w.query("SELECT variant, note FROM runs WHERE run_id = ?", run).rows[0]
    assert variant == "credibility-experiment" and f"lambda = {result['default_strength']:g}" in note
    reports = root / "reports" / "credibility"
    assert "Which strength" in (reports / "credibility_summary.md").read_text()
    assert (reports / "credibility_sweep.png").exists()

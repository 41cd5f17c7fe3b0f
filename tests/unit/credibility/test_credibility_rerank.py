"""Priors, sim x prior ** strength ordering, smoothing, the feedback update, clipping and the pool-size effect."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from hifirag_core.config import CredibilityConfig, build_config, parse_overrides
from hifirag_core.credibility.priors import DEFAULT_PRIORS, clip_weight, resolve_priors
from hifirag_core.credibility.rerank import (
    CredibilityReranker,
    PriorScore,
    rerank_order,
    score_with_prior,
    smooth_weights,
    weight_vector,
    with_strength,
)
from hifirag_core.credibility.source_types import SOURCE_TYPES
from hifirag_core.credibility.update import FeedbackRule, converged_at, correctness_feedback, update_weights


def unit(*rows: list[float]) -> np.ndarray:
    arr = np.array(rows, dtype=np.float32)
    return arr / np.linalg.norm(arr, axis=1, keepdims=True)


# --- priors --------------------------------------------------------------------------------------


def test_default_priors_are_the_paper_values_for_every_type() -> None:
    assert dict(DEFAULT_PRIORS) == {
        "peer_reviewed": 0.95, "government": 0.90, "established_news": 0.75, "organization_report": 0.70,
        "blog": 0.50, "user_generated": 0.40, "unknown": 0.35, "ai_generated": 0.30,
    }
    assert set(DEFAULT_PRIORS) == set(SOURCE_TYPES)


def test_config_overrides_only_the_types_it_names() -> None:
    priors = resolve_priors(CredibilityConfig(priors={"blog": 0.2}))
    assert priors["blog"] == 0.2
    assert priors["government"] == 0.90


def test_config_rejects_unknown_types_and_out_of_range_priors() -> None:
    with pytest.raises(ValidationError):
        CredibilityConfig(priors={"journal": 0.9})  # type: ignore[dict-item]
    with pytest.raises(ValidationError):
        CredibilityConfig(priors={"blog": 1.5})


def test_priors_can_be_set_from_the_command_line_overrides() -> None:
    config = build_config(overrides=parse_overrides(['credibility.priors={"ai_generated": 0.1}',
                                                     "credibility.enabled=true"]))
    assert resolve_priors(config.credibility)["ai_generated"] == 0.1


def test_strength_defaults_to_the_paper_and_rejects_negative_values() -> None:
    assert CredibilityConfig().strength >= 0
    with pytest.raises(ValidationError):
        CredibilityConfig(strength=-0.5)
    assert build_config(overrides=parse_overrides(["credibility.strength=0.25"])).credibility.strength == 0.25


# --- ordering ------------------------------------------------------------------------------------


def test_sim_times_prior_reorders_candidates() -> None:
    sims = np.array([0.90, 0.85, 0.80])
    weights = np.array([0.30, 0.90, 0.50])  # ai_generated, government, blog
    # scores 0.27, 0.765, 0.40
    assert rerank_order(sims, weights).tolist() == [1, 2, 0]
    assert rerank_order(sims, np.ones(3)).tolist() == [0, 1, 2]


def test_strength_zero_is_similarity_one_is_the_paper_and_more_weighs_the_prior_more() -> None:
    sims = np.array([0.90, 0.60])
    priors = np.array([0.30, 0.90])  # ai_generated, government: prior ratio 3
    assert with_strength(priors, 0.0).tolist() == [1.0, 1.0]
    assert with_strength(priors, 1.0).tolist() == pytest.approx(priors.tolist())
    assert rerank_order(sims, with_strength(priors, 0.0)).tolist() == [0, 1]
    # 0.9 * 0.3**s vs 0.6 * 0.9**s: the government page wins once 3**s > 1.5, i.e. s > 0.369
    assert rerank_order(sims, with_strength(priors, 0.3)).tolist() == [0, 1]
    assert rerank_order(sims, with_strength(priors, 0.4)).tolist() == [1, 0]
    with pytest.raises(ValueError, match="at least 0"):
        with_strength(priors, -1.0)


def test_ties_break_by_similarity_then_position() -> None:
    sims = np.array([0.5, 0.9, 0.5])
    weights = np.array([0.9, 0.5, 0.9])  # scores 0.45, 0.45, 0.45
    assert rerank_order(sims, weights).tolist() == [1, 0, 2]


# --- smoothing -----------------------------------------------------------------------------------


def test_smoothing_formula_by_hand() -> None:
    # 0.4 + 0.1 * (0.8*0.9 + 0.5*0.5 + 0.2*0.3) = 0.4 + 0.1 * 1.03 = 0.503
    out = smooth_weights(np.array([0.4]), np.array([[0.8, 0.5, 0.2]]), np.array([[0.9, 0.5, 0.3]]), 0.10)
    assert out[0] == pytest.approx(0.503)


def test_smoothing_clips_to_the_paper_range() -> None:
    high = smooth_weights(np.array([0.95]), np.array([[0.9, 0.9, 0.9]]), np.array([[0.9, 0.9, 0.9]]), 0.10)
    low = smooth_weights(np.array([0.12]), np.array([[-0.5, -0.5, -0.5]]), np.array([[0.9, 0.9, 0.9]]), 0.10)
    assert high[0] == 1.0  # 0.95 + 0.243
    assert low[0] == 0.10  # 0.12 - 0.135
    assert clip_weight(1.7) == 1.0 and clip_weight(-3) == 0.10 and clip_weight(0.5) == 0.5


def test_reranker_neighbours_exclude_the_document_itself() -> None:
    vectors = unit([1, 0, 0], [0.9, 0.1, 0], [0.8, 0.3, 0], [0, 1, 0], [0, 0, 1])
    reranker = CredibilityReranker(vectors, ["blog", "government", "government", "ai_generated", "government"])
    sims, ids = reranker.neighbours(np.array([0]), 3)
    assert ids[0].tolist() == [1, 2, 3]
    assert sims[0] == pytest.approx(vectors[[1, 2, 3]] @ vectors[0])


def test_reranker_smoothed_weight_matches_the_formula() -> None:
    vectors = unit([1, 0, 0], [0.9, 0.1, 0], [0.8, 0.3, 0], [0, 1, 0], [0, 0, 1])
    types = ["blog", "government", "government", "ai_generated", "government"]
    reranker = CredibilityReranker(vectors, types)
    tw = weight_vector(DEFAULT_PRIORS)
    got = reranker.doc_weights(np.array([0]), tw, smoothing_alpha=0.1, n_neighbours=3)
    n_sims = vectors[[1, 2, 3]] @ vectors[0]
    expected = 0.5 + 0.1 * (n_sims[0] * 0.9 + n_sims[1] * 0.9 + n_sims[2] * 0.3)
    assert got[0] == pytest.approx(min(1.0, expected))
    assert reranker.doc_weights(np.array([0]), tw)[0] == 0.5  # no smoothing: the prior


# --- the pool ------------------------------------------------------------------------------------


def _pool_fixture() -> tuple[CredibilityReranker, np.ndarray]:
    # Similarity to the query falls with the index; only document 3 is government.
    vectors = unit([1, 0.00], [1, 0.10], [1, 0.20], [1, 0.30], [1, 2.0])
    types = ["ai_generated", "ai_generated", "ai_generated", "government", "government"]
    return CredibilityReranker(vectors, types), unit([1, 0])


def test_prior_only_reorders_within_the_pool() -> None:
    reranker, query = _pool_fixture()
    # k=1, pool 3: the government document (4th by similarity) is outside the pool and never returned.
    (narrow,) = reranker.search(query, 1, DEFAULT_PRIORS, pool_factor=3)
    assert narrow.doc_ids.tolist() == [0]
    # pool 4 lets the prior lift it to the top.
    (wide,) = reranker.search(query, 1, DEFAULT_PRIORS, pool_factor=4)
    assert wide.doc_ids.tolist() == [3]
    assert wide.scores[0] == pytest.approx(wide.similarities[0] * 0.90)


def test_similarity_only_is_the_faiss_order() -> None:
    reranker, query = _pool_fixture()
    (ranking,) = reranker.search(query, 3, None)
    assert ranking.doc_ids.tolist() == [0, 1, 2]
    assert ranking.weights.tolist() == [1.0, 1.0, 1.0]


def test_pool_larger_than_corpus_is_cut_to_the_corpus() -> None:
    reranker, query = _pool_fixture()
    sims, ids = reranker.pool(query, 50)
    assert ids.shape == (1, 5)
    assert (ids >= 0).all()


def test_reranker_rejects_unknown_types_and_mismatched_lengths() -> None:
    with pytest.raises(ValueError, match="unknown source types"):
        CredibilityReranker(unit([1, 0]), ["journal"])
    with pytest.raises(ValueError, match="source types"):
        CredibilityReranker(unit([1, 0], [0, 1]), ["blog"])


# --- score_with_prior, the pipeline's entry point -----------------------------------------------


URLS = ["https://www.reddit.com/r/AskDocs/comments/a1/x/", "https://www.cdc.gov/flu/", "https://example.com/p"]


def test_score_with_prior_multiplies_similarity_by_the_prior() -> None:
    scores = score_with_prior(URLS, [0.8, 0.7, 0.6], CredibilityConfig(enabled=True, strength=1.0))
    assert scores == [
        PriorScore("user_generated", 0.40, pytest.approx(0.32)),
        PriorScore("government", 0.90, pytest.approx(0.63)),
        PriorScore("unknown", 0.35, pytest.approx(0.21)),
    ]


def test_score_with_prior_raises_the_prior_to_the_configured_strength() -> None:
    scores = score_with_prior(URLS, [0.8, 0.7, 0.6], CredibilityConfig(enabled=True, strength=0.5))
    assert [s.prior for s in scores] == [0.40, 0.90, 0.35]  # the row still reports the type's prior
    assert [s.final_score for s in scores] == pytest.approx([0.8 * 0.40 ** 0.5, 0.7 * 0.90 ** 0.5, 0.6 * 0.35 ** 0.5])
    flat = score_with_prior(URLS, [0.8, 0.7, 0.6], CredibilityConfig(enabled=True, strength=0.0))
    assert [s.final_score for s in flat] == pytest.approx([0.8, 0.7, 0.6])


def test_score_with_prior_disabled_reports_the_prior_but_keeps_similarity() -> None:
    scores = score_with_prior(URLS, [0.8, 0.7, 0.6], CredibilityConfig(enabled=False))
    assert [s.final_score for s in scores] == pytest.approx([0.8, 0.7, 0.6])
    assert [s.prior for s in scores] == [0.40, 0.90, 0.35]


def test_score_with_prior_explicit_types_and_config_priors() -> None:
    config = CredibilityConfig(enabled=True, priors={"unknown": 0.6})
    scores = score_with_prior(URLS, [0.5, 0.5, 0.5], config, ["peer_reviewed", None, None])
    assert [(s.source_type, s.prior) for s in scores] == [("peer_reviewed", 0.95), ("government", 0.90),
                                                          ("unknown", 0.6)]


def test_score_with_prior_smoothing_over_candidates() -> None:
    vectors = unit([1, 0], [1, 0.2], [0, 1])
    config = CredibilityConfig(enabled=True, smoothing=True, smoothing_neighbours=1, strength=1.0)
    scores = score_with_prior(URLS, [0.8, 0.7, 0.6], config, vectors=vectors)
    # candidate 0's nearest other candidate is 1 (government): 0.4 + 0.1 * cos(0,1) * 0.9
    cos01 = float(vectors[0] @ vectors[1])
    assert scores[0].prior == pytest.approx(0.4 + 0.1 * cos01 * 0.9)
    assert scores[0].final_score == pytest.approx(0.8 * scores[0].prior)
    with pytest.raises(ValueError, match="pass vectors="):
        score_with_prior(URLS, [0.8, 0.7, 0.6], config)


def test_score_with_prior_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="3 URLs but 2"):
        score_with_prior(URLS, [0.1, 0.2], CredibilityConfig(enabled=True))


# --- the update from simulated feedback ---------------------------------------------------------


def test_feedback_is_the_mean_delta_per_type_from_correctness_alone() -> None:
    feedback = correctness_feedback(["government", "government", "blog", "ai_generated", "blog"],
                                    [True, False, False, True, True])
    assert feedback == pytest.approx({"government": (0.3 - 0.5) / 2, "blog": (-0.5 + 0.3) / 2, "ai_generated": 0.3})
    with pytest.raises(ValueError, match="correctness flags"):
        correctness_feedback(["blog"], [True, False])


def test_update_formula_by_hand() -> None:
    weights = dict(DEFAULT_PRIORS)
    new = update_weights(weights, {"government": 0.3, "blog": -0.3, "ai_generated": -0.1})
    assert new["government"] == pytest.approx(0.915)  # 0.90 + 0.05 * 0.3
    assert new["blog"] == pytest.approx(0.485)  # 0.50 - 0.05 * 0.3
    assert new["ai_generated"] == pytest.approx(0.295)  # 0.30 - 0.05 * 0.1
    assert new["peer_reviewed"] == 0.95  # no feedback, no change


def test_update_clips_at_both_ends() -> None:
    new = update_weights({"government": 0.99, "ai_generated": 0.11}, {"government": 0.3, "ai_generated": -0.5})
    assert new == {"government": 1.0, "ai_generated": 0.10}


def test_update_uses_the_rule_rate_and_rejects_unknown_types() -> None:
    new = update_weights({"blog": 0.5}, {"blog": 1.0}, FeedbackRule(eta=0.2))
    assert new["blog"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match="without a weight"):
        update_weights({"blog": 0.5}, {"forum": 1.0})


def test_convergence_step() -> None:
    history = [{"a": 0.5}, {"a": 0.6}, {"a": 0.65}, {"a": 0.655}, {"a": 0.656}, {"a": 0.656}]
    # changes 0.1, 0.05, 0.005, 0.001, 0: trailing-3 means 0.0517, 0.0187, 0.002 -> step 5
    assert converged_at(history, ["a"]) == 5
    assert converged_at(history[:4], ["a"]) is None

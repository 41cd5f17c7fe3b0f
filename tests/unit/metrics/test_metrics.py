"""Retrieval metrics against hand-computed values, and the bootstrap intervals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hifirag_core.metrics.bootstrap import bootstrap_ci, paired_bootstrap_ci
from hifirag_core.metrics.retrieval import (
    adversarial_hit_rate,
    dcg,
    high_credibility_ratio,
    mean_credibility_at_k,
    ndcg_at_k,
    precision_at_k,
    reciprocal_rank,
)

RANKED = ["a", "b", "c", "d", "e"]


def test_precision_at_k() -> None:
    assert precision_at_k(RANKED, {"a", "c", "x"}, 5) == pytest.approx(0.4)
    assert precision_at_k(RANKED, {"a", "c", "x"}, 2) == pytest.approx(0.5)
    assert precision_at_k(["a"], {"a"}, 5) == pytest.approx(0.2)  # divided by k, not by what came back
    assert precision_at_k(RANKED, {"a": 2.0, "b": 0.0}, 2) == pytest.approx(0.5)  # grade 0 is not relevant


def test_duplicates_count_once() -> None:
    assert precision_at_k(["a", "a", "b"], {"a"}, 2) == pytest.approx(0.5)


def test_ndcg_binary_by_hand() -> None:
    # DCG = 0 + 1/log2(3) + 1/log2(4); IDCG = 1 + 1/log2(3)
    expected = (1 / math.log2(3) + 0.5) / (1 + 1 / math.log2(3))
    assert ndcg_at_k(["b", "a", "c"], {"a", "c"}, 3) == pytest.approx(expected)
    assert expected == pytest.approx(0.69342, abs=1e-5)


def test_ndcg_graded_by_hand() -> None:
    # DCG = 1 + 2/log2(3) = 2.26186; IDCG = 2 + 1/log2(3) = 2.63093
    assert ndcg_at_k(["b", "a"], {"a": 2.0, "b": 1.0}, 2) == pytest.approx(0.85972, abs=1e-5)
    assert ndcg_at_k(["a", "b"], {"a": 2.0, "b": 1.0}, 2) == pytest.approx(1.0)


def test_ndcg_ideal_uses_all_labelled_documents_and_zero_without_any() -> None:
    # three relevant documents, only one retrieved at rank 1: DCG 1, IDCG@3 = 1 + 1/log2(3) + 1/2
    assert ndcg_at_k(["a", "z"], {"a", "b", "c"}, 3) == pytest.approx(1 / (1 + 1 / math.log2(3) + 0.5))
    assert ndcg_at_k(RANKED, set(), 5) == 0.0
    assert dcg([3, 2]) == pytest.approx(3 + 2 / math.log2(3))


def test_reciprocal_rank() -> None:
    assert reciprocal_rank(RANKED, {"a"}) == 1.0
    assert reciprocal_rank(RANKED, {"c"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(RANKED, {"e"}, k=3) == 0.0  # outside the cut-off
    assert reciprocal_rank(RANKED, {"x"}) == 0.0


def test_adversarial_hit_rate() -> None:
    assert adversarial_hit_rate(["a", "adv1", "b", "adv2", "c"], {"adv1", "adv2", "adv3"}, 5) == pytest.approx(0.4)
    assert adversarial_hit_rate(["a", "adv1"], {"adv1"}, 1) == 0.0


def test_credibility_metrics() -> None:
    assert mean_credibility_at_k([0.9, 0.3, 0.5], 2) == pytest.approx(0.6)
    assert mean_credibility_at_k([], 5) == 0.0
    assert high_credibility_ratio([0.9, 0.3, 0.7, 0.5], 4) == pytest.approx(0.5)
    assert high_credibility_ratio([0.9, 0.3], 4, threshold=0.95) == 0.0


def test_k_must_be_positive() -> None:
    with pytest.raises(ValueError):
        precision_at_k(RANKED, {"a"}, 0)
    with pytest.raises(ValueError):
        mean_credibility_at_k([0.5], 0)


# --- bootstrap -----------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_for_a_seed() -> None:
    values = np.random.default_rng(1).normal(0.5, 0.2, 200)
    first = bootstrap_ci(values, n_resamples=2000, seed=7)
    assert bootstrap_ci(values, n_resamples=2000, seed=7) == first
    assert bootstrap_ci(values, n_resamples=2000, seed=8) != first
    assert first.low < first.mean < first.high
    assert first.mean == pytest.approx(float(values.mean()))


def test_bootstrap_of_a_constant_is_a_point() -> None:
    ci = bootstrap_ci([0.4] * 30, n_resamples=500)
    assert (ci.low, ci.high) == pytest.approx((0.4, 0.4))


def test_bootstrap_width_shrinks_with_more_queries() -> None:
    rng = np.random.default_rng(3)
    small = bootstrap_ci(rng.normal(0, 1, 50), n_resamples=2000)
    large = bootstrap_ci(rng.normal(0, 1, 2000), n_resamples=2000)
    assert (large.high - large.low) < (small.high - small.low) / 3


def test_paired_constant_difference() -> None:
    baseline = np.random.default_rng(2).uniform(0, 1, 100)
    ci = paired_bootstrap_ci(baseline + 0.1, baseline, n_resamples=1000)
    assert ci.mean_diff == pytest.approx(0.1)
    assert (ci.low, ci.high) == pytest.approx((0.1, 0.1))
    assert ci.excludes_zero


def test_pairing_detects_a_small_shift_that_independent_intervals_miss() -> None:
    rng = np.random.default_rng(4)
    baseline = rng.uniform(0, 1, 300)  # large spread between queries
    system = baseline + 0.02 + rng.normal(0, 0.01, 300)  # a small, consistent gain
    paired = paired_bootstrap_ci(system, baseline, n_resamples=2000)
    assert paired.excludes_zero and paired.low > 0
    a, b = bootstrap_ci(system, n_resamples=2000), bootstrap_ci(baseline, n_resamples=2000)
    assert a.low < b.high  # unpaired intervals overlap


def test_paired_bootstrap_is_deterministic_and_checks_its_input() -> None:
    a, b = [0.1, 0.5, 0.9, 0.4], [0.2, 0.5, 0.7, 0.1]
    assert paired_bootstrap_ci(a, b, n_resamples=300, seed=1) == paired_bootstrap_ci(a, b, n_resamples=300, seed=1)
    with pytest.raises(ValueError, match="same length"):
        paired_bootstrap_ci([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        bootstrap_ci([1.0, float("nan")])
    with pytest.raises(ValueError, match="non-empty"):
        bootstrap_ci([])

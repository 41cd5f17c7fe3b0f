"""Bootstrap confidence intervals: of a mean, and of the paired mean difference of two systems.

Percentile intervals over resampled query sets, with a fixed seed so a report is reproducible.
The paired version resamples queries once and takes both systems' values for the same queries,
which is what makes a small difference between two systems on the same questions detectable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 20_251_129
_CHUNK = 1_000  # resamples per batch, to bound memory at n_queries x _CHUNK indices


@dataclass(frozen=True)
class BootstrapCI:
    """A mean with its percentile bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int
    n_resamples: int
    confidence: float


@dataclass(frozen=True)
class PairedBootstrapCI:
    """Mean of (system - baseline) over the same queries, with its percentile bootstrap interval."""

    mean_system: float
    mean_baseline: float
    mean_diff: float
    low: float
    high: float
    n: int
    n_resamples: int
    confidence: float

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of zero."""
        return self.low > 0 or self.high < 0


def _resampled_means(values: np.ndarray, n_resamples: int, seed: int) -> np.ndarray:
    rng = np.random.Generator(np.random.PCG64(seed))
    n = len(values)
    means = np.empty(n_resamples, dtype=np.float64)
    for start in range(0, n_resamples, _CHUNK):
        stop = min(start + _CHUNK, n_resamples)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = values[idx].mean(axis=1)
    return means


def _check(values: np.ndarray, n_resamples: int, confidence: float) -> None:
    if values.ndim != 1 or len(values) == 0:
        raise ValueError("need a non-empty one-dimensional sequence of values")
    if not np.all(np.isfinite(values)):
        raise ValueError("values contain NaN or infinity; drop or score those queries first")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")


def _interval(means: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_ci(values: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES, confidence: float = 0.95,
                 seed: int = DEFAULT_SEED) -> BootstrapCI:
    """Percentile bootstrap interval of the mean of ``values``."""
    arr = np.asarray(values, dtype=np.float64)
    _check(arr, n_resamples, confidence)
    low, high = _interval(_resampled_means(arr, n_resamples, seed), confidence)
    return BootstrapCI(float(arr.mean()), low, high, len(arr), n_resamples, confidence)


def paired_bootstrap_ci(system: Sequence[float], baseline: Sequence[float], n_resamples: int = DEFAULT_RESAMPLES,
                        confidence: float = 0.95, seed: int = DEFAULT_SEED) -> PairedBootstrapCI:
    """Percentile bootstrap interval of mean(system - baseline), both measured on the same queries."""
    a = np.asarray(system, dtype=np.float64)
    b = np.asarray(baseline, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values must have the same length: {a.shape} vs {b.shape}")
    diff = a - b
    _check(diff, n_resamples, confidence)
    low, high = _interval(_resampled_means(diff, n_resamples, seed), confidence)
    return PairedBootstrapCI(float(a.mean()), float(b.mean()), float(diff.mean()), low, high, len(diff),
                             n_resamples, confidence)

"""The logistic fit behind every answerability calibration (the transfer set's and a corpus's own)."""

from __future__ import annotations

import numpy as np

L2 = 1.0


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2, steps: int = 50) -> np.ndarray:
    """Weights (intercept first) maximizing the penalized log-likelihood (Newton-Raphson)."""
    design = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(design.shape[1])
    penalty = l2 * np.eye(design.shape[1])
    penalty[0, 0] = 0.0  # the intercept is not shrunk
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-design @ w))
        step = np.linalg.solve(design.T @ (design * (p * (1 - p))[:, None]) + penalty,
                               design.T @ (y - p) - penalty @ w)
        w = w + step
        if np.abs(step).max() < 1e-10:
            break
    return w

"""Shared helpers for the credibility tests: a fast deterministic encoder and the MedQuAD path."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from hifirag_core.resources import shared_data_dir


class HashingEncoder:
    """Bag of hashed words as unit vectors: lexical similarity with no model, for fast offline tests."""

    def __init__(self, dim: int = 384):
        self.dim = dim
        self.encoded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.md5(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        self.encoded += len(texts)
        return out


def medquad_path() -> Path:
    """The shared MedQuAD file, or a skip that says why the test cannot run."""
    path = shared_data_dir() / "health" / "medquad_docs.jsonl.gz"
    if not path.exists():
        pytest.skip(f"shared data absent: {path} (set HIFIRAG_SHARED_DATA to the shared data folder)")
    return path

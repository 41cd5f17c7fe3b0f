"""BERTScore F1 from a local model folder: the organisers' "DeBERTaScore", or MiniLM under its own name.

The MMU-RAGent organisers score answers with ``bert-score`` on ``microsoft/deberta-xlarge-mnli``,
layer 40, no idf, no baseline rescaling. That model is used only when a configured local folder
holds it; nothing is downloaded. Otherwise the packaged MiniLM (all 6 layers) scores instead, under
the metric name ``bertscore_minilm_f1``, so the two scales are never mixed or compared. MiniLM
BERTScore rates a question echoed as its own answer above real extracts (docs/evaluation.md), so callers
report it beside that echo floor and the answer length and never rank on it alone.

Process cache: ``_SCORERS`` keeps one scorer per model folder and layer (loading DeBERTa takes a minute).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEBERTA_METRIC = "bertscore_deberta_f1"
MINILM_METRIC = "bertscore_minilm_f1"
DEBERTA_LAYER = 40  # the organisers' setting (bert-score's default layer for this model)
MINILM_LAYERS = 6  # all of them: bert-score has no tuned layer for this model


@dataclass(frozen=True)
class BertScoreSpec:
    """Which model scores, from which folder, at which layer, and the metric name it reports under."""

    metric: str
    model_path: Path
    num_layers: int
    label: str


def select_bertscore(deberta_path: str | Path | None, *, deberta_layer: int = DEBERTA_LAYER) -> BertScoreSpec:
    """DeBERTa when ``deberta_path`` is an existing folder, else the packaged MiniLM."""
    if deberta_path and Path(deberta_path).is_dir():
        return BertScoreSpec(DEBERTA_METRIC, Path(deberta_path), deberta_layer,
                             f"BERTScore F1, deberta-xlarge-mnli layer {deberta_layer} (organisers' DeBERTaScore)")
    from hifirag_core.retrieval.embeddings import minilm_path

    return BertScoreSpec(MINILM_METRIC, minilm_path(), MINILM_LAYERS,
                         f"BERTScore F1, MiniLM-L6 all {MINILM_LAYERS} layers (not comparable to DeBERTaScore)")


_SCORERS: dict[tuple[Path, int], Any] = {}
_SCORERS_LOCK = threading.Lock()


def load_scorer(spec: BertScoreSpec, batch_size: int) -> Any:
    """One bert-score scorer per model folder and layer per process (loading DeBERTa takes a minute)."""
    with _SCORERS_LOCK:
        key = (spec.model_path, spec.num_layers)
        if key not in _SCORERS:
            # a hub name must fail at once instead of retrying for a minute
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            from bert_score import BERTScorer

            _SCORERS[key] = BERTScorer(model_type=str(spec.model_path), num_layers=spec.num_layers, idf=False,
                                       rescale_with_baseline=False, batch_size=batch_size, device="cpu")
        return _SCORERS[key]


def bertscore_f1(candidates: Sequence[str], references: Sequence[str], spec: BertScoreSpec,
                 batch_size: int = 32) -> list[float]:
    """Per-pair BERTScore F1; an empty candidate scores 0 without touching the model."""
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates for {len(references)} references")
    out = [0.0] * len(candidates)
    todo = [i for i, (c, r) in enumerate(zip(candidates, references, strict=True)) if c.strip() and r.strip()]
    if not todo:
        return out
    scorer = load_scorer(spec, batch_size)
    _, _, f1 = scorer.score([candidates[i] for i in todo], [references[i] for i in todo], batch_size=batch_size)
    for i, value in zip(todo, f1.tolist(), strict=True):
        out[i] = float(value)
    return out

"""Calibrate the citation support threshold (``EvaluationConfig.citation_support_threshold``).

Support is the MiniLM cosine between an answer sentence and the best sentence of a source, among the
source's sentences that BM25 ranks highest for it (``metrics.citations.support_matrix``, as the
evaluation computes it). On the
FAQ set (``../shared/data/docs_faq/faq_qa.jsonl``), every gold-answer sentence of three or more
words is paired with:

* positive: its own gold answer (the gold section's text) *with that sentence removed*, so the
  support has to come from the rest of the section, as it would for a sentence the writer
  paraphrased (the sentence against the full section scores 1.0, which calibrates nothing);
* negatives: the gold answers of the other questions on the same FAQ page (same topic, other
  question) and of the five questions whose wording is closest (MiniLM) elsewhere in the set.

It prints ROC AUC, the threshold that maximises balanced accuracy (Youden's J) with its true and
false positive rates, and the rates at a few round thresholds.

    .venv/bin/python tools/calibrate_citation_support.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.metrics.citations import SHORTLIST, source_passages, support_matrix  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402

FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
NEAREST = 5


def auc(pos: np.ndarray, neg: np.ndarray) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    scores = np.concatenate([pos, neg])
    ranks = scores.argsort().argsort().astype(np.float64) + 1
    # average the ranks of ties
    for value in np.unique(scores):
        tie = scores == value
        if tie.sum() > 1:
            ranks[tie] = ranks[tie].mean()
    return float((ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def main() -> None:
    if not FAQ.exists():
        print(f"needs {FAQ} (the shared data); set HIFIRAG_SHARED_DATA")
        return
    rows = [json.loads(line) for line in FAQ.read_text(encoding="utf-8").splitlines() if line.strip()]
    cache = Path(tempfile.gettempdir()) / "hifirag-calibration-vectors.sqlite"
    embedder = Embedder(cache)
    passages = [source_passages(r["answer"]) for r in rows]
    qvecs = embedder.encode([r["question"] for r in rows])
    by_page: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        by_page[f"{r['corpus']}:{r['page']}"].append(i)
    pos: list[float] = []
    verbatim: list[float] = []
    neg_page: list[float] = []
    neg_near: list[float] = []

    def similarity(a: list[str], b: list[str]) -> np.ndarray:
        return embedder.encode(a) @ embedder.encode(b).T

    def support(sentence: str, texts: list[str]) -> float:
        """The evaluation's own support score (BM25 shortlist, then MiniLM cosine)."""
        return float(support_matrix([sentence], {1: texts}, similarity, SHORTLIST)[1][0])

    for i, r in enumerate(rows):
        sentences = passages[i]
        if len(sentences) < 2:
            continue
        same_page = [j for j in by_page[f"{r['corpus']}:{r['page']}"] if j != i]
        sims = qvecs @ qvecs[i]
        near = [int(j) for j in np.argsort(-sims) if int(j) != i and int(j) not in same_page][:NEAREST]
        for k, sentence in enumerate(sentences):
            pos.append(support(sentence, sentences[:k] + sentences[k + 1 :]))
            verbatim.append(support(sentence, sentences))
            neg_page.extend(support(sentence, passages[j]) for j in same_page if passages[j])
            neg_near.extend(support(sentence, passages[j]) for j in near if passages[j])
    p, n = np.array(pos), np.array(neg_page + neg_near)
    thresholds = np.round(np.arange(0.30, 0.96, 0.01), 2)
    tpr = np.array([(p >= t).mean() for t in thresholds])
    fpr = np.array([(n >= t).mean() for t in thresholds])
    best = int(np.argmax(tpr - fpr))
    print(f"questions {len(rows)}; positive pairs {len(p)} (leave-one-out), negatives {len(n)} "
          f"({len(neg_page)} same page, {len(neg_near)} nearest questions)")
    print(f"ROC AUC {auc(p, n):.3f}; same-page negatives only {auc(p, np.array(neg_page)):.3f}")
    print(f"verbatim support (sentence against its full section): min {min(verbatim):.3f}")
    print(f"best balanced accuracy at threshold {thresholds[best]:.2f}: TPR {tpr[best]:.3f}, FPR {fpr[best]:.3f}")
    print("threshold  TPR    FPR")
    for t in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.8):
        k = int(np.argmin(np.abs(thresholds - t)))
        print(f"  {t:.2f}     {tpr[k]:.3f}  {fpr[k]:.3f}")


if __name__ == "__main__":
    main()

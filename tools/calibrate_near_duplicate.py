"""Calibrate the fresh test-set builder's near-duplicate threshold (``FreshSetConfig.near_duplicate_threshold``).

The check embeds each pair as "question\\nanswer" with MiniLM and drops a pair whose cosine to an
earlier one reaches the threshold. There is no labelled paraphrase set here, so the threshold is set
from distinct questions, of two kinds: the MMU-RAGent validation lines the paper does not score
(101-300, with a reference: diverse topics) and the FAQ set (220 questions from the Python and
Django FAQs: many on the same few topics, as a set about a few recent events would be; a handful are
asked twice on different pages, and count as distinct here, which errs towards keeping pairs). Each
set is split in two halves by a fixed hash of the question id; neighbours are looked for within the
same set and half. On half A (tuned), the threshold is the smallest multiple of 0.05 at which at
most 1% of the questions have a neighbour at or above it; half B is reported, with the pairs flagged.

    .venv/bin/python tools/calibrate_near_duplicate.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hifirag_core.evaluation.datasets import MMU_PAPER_LIMIT  # noqa: E402
from hifirag_core.hashing import stable_hash  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402
from hifirag_core.testset.build import pair_text  # noqa: E402

MMU = shared_data_dir() / "mmu_ragent" / "t2t_val.jsonl"
FAQ = shared_data_dir() / "docs_faq" / "faq_qa.jsonl"
MAX_FLAGGED = 0.01
STEP = 0.05


def nearest(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's highest cosine to another row, and which row that is."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -1.0)
    return sims.max(axis=1), sims.argmax(axis=1)


def flagged_share(nn: np.ndarray, threshold: float) -> float:
    return float((nn >= threshold).mean())


def show_pairs(label: str, items: list[tuple[str, str]], nn: np.ndarray, arg: np.ndarray, threshold: float) -> None:
    if not (nn >= threshold).any():
        print(f"  {label}: none")
        return
    shown = set()
    for i in np.argsort(-nn):
        if nn[i] < threshold:
            break
        j = int(arg[i])
        if (j, int(i)) in shown:
            continue
        shown.add((int(i), j))
        print(f"  {label} {nn[i]:.3f}  {items[i][0][:60]!r}  ~  {items[j][0][:60]!r}")


def load() -> dict[str, list[tuple[str, str, str]]]:
    """(id, question, answer) per set."""
    mmu = [json.loads(line) for line in MMU.read_text(encoding="utf-8").splitlines()][MMU_PAPER_LIMIT:]
    faq = [json.loads(line) for line in FAQ.read_text(encoding="utf-8").splitlines()]
    return {"MMU 101-300": [(r["iid"], r["query"], r["reference"]) for r in mmu if r.get("reference")],
            "FAQ": [(r["id"], r["question"], r["answer"]) for r in faq]}


def main() -> None:
    if not MMU.exists() or not FAQ.exists():
        print(f"needs {MMU} and {FAQ} (the shared data); set HIFIRAG_SHARED_DATA")
        return
    embedder = Embedder(Path(tempfile.gettempdir()) / "hifirag-calibration-vectors.sqlite")
    parts: dict[tuple[str, str], tuple[list[tuple[str, str]], np.ndarray, np.ndarray]] = {}
    for name, rows in load().items():
        for half in "AB":
            items = [(q, a) for qid, q, a in rows if "AB"[int(stable_hash(qid), 16) % 2] == half]
            nn, arg = nearest(embedder.encode([pair_text(q, a) for q, a in items]))
            parts[(name, half)] = (items, nn, arg)
    tuned = np.concatenate([parts[k][1] for k in parts if k[1] == "A"])
    reported = np.concatenate([parts[k][1] for k in parts if k[1] == "B"])
    thresholds = np.round(np.arange(0.50, 1.0001, STEP), 2)
    chosen = next(float(t) for t in thresholds if flagged_share(tuned, t) <= MAX_FLAGGED)
    print("questions per half: " + ", ".join(f"{n} {h} {len(v[0])}" for (n, h), v in parts.items()))
    print("nearest-neighbour cosine of question+answer within a set's half, quantiles 50/90/99/max:")
    for (name, half), (_, nn, _) in parts.items():
        print(f"  {name:12s} {half}: " + " / ".join(f"{x:.3f}" for x in np.quantile(nn, [0.5, 0.9, 0.99, 1.0])))
    print("share of questions with a neighbour at or above t (A tuned, B reported):")
    for t in thresholds:
        mark = "  <- chosen on A" if t == chosen else ""
        per_set = "  ".join(f"{name} B {flagged_share(parts[(name, 'B')][1], t):5.1%}"
                            for name in dict.fromkeys(n for n, _ in parts))
        print(f"  t={t:.2f}  A {flagged_share(tuned, t):5.1%}  B {flagged_share(reported, t):5.1%}  ({per_set}){mark}")
    print(f"\nthreshold {chosen:.2f}; the pairs it flags in half A (tuned) and half B (reported):")
    for (name, half), (items, nn, arg) in parts.items():
        show_pairs(f"{name} {half}", items, nn, arg, chosen)
    print("No labelled paraphrases here: how many real duplicates the threshold catches is not measured.")


if __name__ == "__main__":
    main()

"""Fit the answerability calibration and choose its threshold, on the tune half of the answerability set only.

The calibration the code ships with now comes from ``tools/answerability_transfer.py`` (two corpora, the
signals chosen by leaving one corpus out); this script is the docs-only fit it replaced, kept to compare.

Reads a run of the answerability set (``hifirag eval --dataset answerability-tune --variants final_abstain``
writes one): each question's evidence signals (``answers.answerability_signals``: section, sentence,
coverage) and its label (``answerable`` in the question file). Then:

1. fits a logistic regression of "answerable" on the signals with an L2 penalty of 1.0 (a weakly
   informative prior). The tune half is almost separable (the FAQ's headings are its questions, so
   every answerable question has a section holding all its keywords): unpenalized, the fit puts all its
   weight on "every keyword present" and is certain everywhere (coefficients 20-27, and a probability of
   0.004 for an answerable question whose best section holds three of its four keywords). Penalized, the
   score is a probability shrunk towards 0.5 where the data cannot tell, and no one signal decides alone;
2. that model is ``answerability.CALIBRATION``: the stored score is its P(answerable);
3. chooses ``answerability.threshold`` as the lowest threshold that abstains on at least ``--recall`` of
   the unanswerable questions (the target is 80%; 85% leaves a margin), so the answer abstains only
   where it must: a set whose answerable questions resemble their evidence less than the FAQ's (whose
   headings are the questions) keeps its answers. ``partial_below`` is the score above which ``--sure``
   of the questions were answerable;
4. prints the tune half's abstention precision and recall at that threshold, the leave-one-out spread of
   the direction's coefficients (a signal whose sign flips is not worth keeping), and what was missed.

It never reads the report half: a run of the whole set is filtered to ``half == "tune"``.

    .venv/bin/python tools/calibrate_answerability.py RUN_ID --data-root /tmp/abstain14-dev
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hifirag_core.evaluation.transfer import fit_logistic  # noqa: E402
from hifirag_core.resources import data_root  # noqa: E402
from hifirag_core.store.warehouse import Warehouse  # noqa: E402

FEATURES = ("section", "sentence", "coverage")


def probabilities(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(w[0] + x @ w[1:])))


def load(warehouse: Warehouse, run_id: str) -> tuple[list[str], list[str], np.ndarray, np.ndarray]:
    rows = warehouse.query(
        """SELECT q.question_id, json_extract_string(q.meta_json, '$.origin'),
                  json_extract_string(q.meta_json, '$.half'),
                  TRY_CAST(json_extract(q.meta_json, '$.answerable') AS BOOLEAN), a.answerability_signals
           FROM questions q JOIN answers a USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.line_no""", [run_id]).rows
    tune = [r for r in rows if r[2] == "tune" and r[3] is not None and r[4]]
    if not tune:
        raise SystemExit(f"run {run_id} has no tune-half questions with evidence signals")
    signals = [json.loads(r[4]) for r in tune]
    x = np.array([[s[f] for f in FEATURES] for s in signals], dtype=float)
    y = np.array([1.0 if r[3] else 0.0 for r in tune])
    return [r[0] for r in tune], [r[1] for r in tune], x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_id")
    parser.add_argument("--data-root", type=Path, help="the data root [default: $HIFIRAG_DATA_ROOT, else the project's]")
    parser.add_argument("--recall", type=float, default=0.85, help="abstention recall the threshold must reach")
    parser.add_argument("--sure", type=float, default=0.95, help="share answerable above partial_below")
    parser.add_argument("--l2", type=float, default=1.0, help="penalty of the direction's fit")
    args = parser.parse_args()

    ids, origins, x, y = load(Warehouse(data_root(args.data_root)), args.run_id)
    print(f"tune half: {len(y)} questions, {int(y.sum())} answerable, {int(len(y) - y.sum())} not "
          f"({', '.join(f'{o} {origins.count(o)}' for o in sorted(set(origins)))})")
    for name, column in zip(FEATURES, x.T, strict=True):
        print(f"  {name:9s} answerable mean {column[y == 1].mean():.3f}  unanswerable mean {column[y == 0].mean():.3f}")
    direction = fit_logistic(x, y, l2=args.l2)
    loo = np.array([fit_logistic(np.delete(x, i, 0), np.delete(y, i), l2=args.l2) for i in range(len(y))])
    print("direction: " + ", ".join(f"{n} {v:.3f} [leave-one-out {loo[:, j + 1].min():.2f}, {loo[:, j + 1].max():.2f}]"
                                    for j, (n, v) in enumerate(zip(FEATURES, direction[1:], strict=True))))
    w = direction
    print(f"CALIBRATION = Calibration(intercept={w[0]:.3f}, " +
          ", ".join(f"{n}={v:.3f}" for n, v in zip(FEATURES, w[1:], strict=True)) + ")")
    p = probabilities(w, x)
    threshold = float(next(t for t in np.arange(0.01, 1.0, 0.01).round(2) if (p[y == 0] < t).mean() >= args.recall))
    abstain = p < threshold
    recall = abstain[y == 0].mean()
    precision = (y[abstain] == 0).mean() if abstain.any() else float("nan")
    kept = (~abstain[y == 1]).mean()
    order = np.argsort(-p)
    partial_below = next((float(np.ceil(p[order[k - 1]] * 100) / 100) for k in range(len(order), 0, -1)
                          if y[order[:k]].mean() >= args.sure), 1.0)
    print(f"threshold {threshold:.2f}: abstention recall {recall:.3f}, precision {precision:.3f}, "
          f"answerable kept {kept:.3f}; partial below {max(partial_below, threshold):.2f}")
    for origin in sorted(set(origins)):
        mask = np.array([o == origin for o in origins])
        print(f"  {origin}: abstained {abstain[mask].mean():.3f} of {int(mask.sum())}")
    missed = [(ids[i], round(float(p[i]), 3)) for i in np.where((y == 0) & ~abstain)[0]]
    print(f"unanswerable answered anyway ({len(missed)}): {missed}")
    print(f"answerable abstained on: {[(ids[i], round(float(p[i]), 3)) for i in np.where((y == 1) & abstain)[0]]}")


if __name__ == "__main__":
    main()

"""Does the answerability judgment transfer? Fit on one corpus, measure on the other (the transfer table).

Reads the runs of the transfer set (``transfer-docs`` and ``transfer-health``, one variant that answers
every question and stores each decision's signals, such as ``final_judged``) and, for a calibration of the
signals:

* **abstain**: on the unanswerable questions of a report half, the share whose score falls below the
  threshold (the answer would abstain);
* **answer**: on the answerable ones, the share at or above it (the answer would be given);
* each with a Wilson 95% interval;
* **CRAG-style score** per question: +1 answered with the gold section kept and cited, 0 abstained, -1
  answered without it (every answer to an unanswerable question is -1); its mean, next to the
  never-abstain baseline (the same answers, none withheld).

The fits (:func:`fit_calibration`) are penalized logistic regressions on the tune halves only, with the
threshold chosen on the same tune data as the lowest that abstains on ``recall`` of its unanswerable
questions, and ``partial_below`` the score above which ``sure`` of its questions were answerable. Leave
one corpus out: fit on docs, measure on health, and the other way; the shipped calibration is the fit on
both tune halves, measured on both report halves.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hifirag_core.evidence.answerability import SIGNALS, Calibration
from hifirag_core.store.warehouse import Warehouse

# The signals the fit reads (see ``hifirag_core.evidence.answerability``): the whole question's sentence
# similarity and coverage transfer poorly to two-part questions; the weakest part's do not.
FEATURES: tuple[str, ...] = ("section", "part_sentence", "part_coverage")
L2 = 1.0
RECALL = 0.85  # abstention recall the threshold must reach on the tune data (target 0.80, with a margin)
SURE = 0.95  # share answerable above partial_below


@dataclass(frozen=True)
class Labelled:
    """One question of a run: its corpus, half, label, signals, and whether its answer cites the gold."""

    question_id: str
    corpus: str
    half: str
    origin: str
    answerable: bool
    signals: dict[str, float]
    gold_cited: bool
    verdict: str | None = None  # the run's own decision (a model writer's, with one)

    def x(self, features: tuple[str, ...] = FEATURES) -> list[float]:
        return [float(self.signals.get(f, 0.0)) for f in features]


def latest_run(warehouse: Warehouse, dataset: str, variant: str) -> str:
    rows = warehouse.query("""SELECT run_id FROM runs WHERE dataset = ? AND variant = ? AND question_id IS NULL
                              ORDER BY started_at DESC LIMIT 1""", [dataset, variant]).rows
    if not rows:
        raise LookupError(f"no run of {dataset} with {variant}: run `hifirag eval --dataset "
                          f"{dataset.replace('_', '-')} --variants {variant}`")
    return rows[0][0]


def load_run(warehouse: Warehouse, run_id: str) -> list[Labelled]:
    """Every question of the run with its label and signals (a question without signals is left out)."""
    rows = warehouse.query(
        """SELECT q.question_id, json_extract_string(q.meta_json, '$.corpus'), json_extract_string(q.meta_json, '$.half'),
                  json_extract_string(q.meta_json, '$.origin'),
                  TRY_CAST(json_extract(q.meta_json, '$.answerable') AS BOOLEAN), a.answerability_signals,
                  coalesce(f.gold_section_kept AND f.cited, false), a.answerability
           FROM questions q JOIN answers a USING (run_id, question_id)
           LEFT JOIN evidence_funnel f USING (run_id, question_id)
           WHERE q.run_id = ? ORDER BY q.question_id""", [run_id]).rows
    return [Labelled(qid, corpus, half, origin, bool(answerable), json.loads(signals), bool(cited), verdict)
            for qid, corpus, half, origin, answerable, signals, cited, verdict in rows
            if signals and answerable is not None]


# --- the fit ----------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class Fit:
    calibration: Calibration
    threshold: float
    partial_below: float
    n: int


def _scores(calibration: Calibration, data: list[Labelled]) -> np.ndarray:
    return np.array([calibration.probability(_signals(q)) for q in data])


def _signals(q: Labelled):
    from hifirag_core.evidence.answerability import EvidenceSignals

    return EvidenceSignals(**{name: float(q.signals.get(name, 0.0)) for name in SIGNALS})


def fit_calibration(data: list[Labelled], note: str, features: tuple[str, ...] = FEATURES, l2: float = L2,
                    recall: float = RECALL, sure: float = SURE) -> Fit:
    """The calibration, threshold and partial_below fitted on ``data`` (tune halves only, by the caller)."""
    x = np.array([q.x(features) for q in data])
    y = np.array([1.0 if q.answerable else 0.0 for q in data])
    w = fit_logistic(x, y, l2)
    weights = {name: 0.0 for name in SIGNALS} | {f: round(float(v), 3) for f, v in zip(features, w[1:], strict=True)}
    calibration = Calibration(intercept=round(float(w[0]), 3), note=note, **weights)
    p = _scores(calibration, data)
    threshold = float(next(t for t in np.arange(0.01, 1.0, 0.01).round(2) if (p[y == 0] < t).mean() >= recall))
    order = np.argsort(-p, kind="stable")
    partial_below = next((float(math.ceil(p[order[k - 1]] * 100) / 100) for k in range(len(order), 0, -1)
                          if y[order[:k]].mean() >= sure), 1.0)
    return Fit(calibration, threshold, max(threshold, partial_below), len(data))


# --- the measures -----------------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default)."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


@dataclass(frozen=True)
class Measure:
    abstain: tuple[int, int]  # unanswerable abstained on, of
    answer: tuple[int, int]  # answerable answered, of
    crag: float
    never_abstain: float

    def row(self) -> list[str]:
        def rate(k: int, n: int) -> str:
            lo, hi = wilson(k, n)
            return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})" if n else "-"

        return [rate(*self.abstain), rate(*self.answer), f"{self.crag:+.3f}", f"{self.never_abstain:+.3f}"]


def crag_point(q: Labelled, abstains: bool) -> int:
    """+1 answered with the gold cited, 0 abstained, -1 answered without it."""
    if abstains:
        return 0
    return 1 if q.answerable and q.gold_cited else -1


def measure(calibration: Calibration, threshold: float, data: list[Labelled]) -> Measure:
    """The measures if the answer abstained below ``threshold`` of ``calibration``'s score."""
    return _measure(data, _scores(calibration, data) < threshold)


def measure_verdicts(data: list[Labelled]) -> Measure:
    """The measures if the answer abstained where the run decided ``not_found`` (a model writer's own
    verdict, or the shipped calibration's)."""
    return _measure(data, np.array([q.verdict == "not_found" for q in data], dtype=bool))


def _measure(data: list[Labelled], abstains: np.ndarray) -> Measure:
    un = [a for q, a in zip(data, abstains, strict=True) if not q.answerable]
    ans = [not a for q, a in zip(data, abstains, strict=True) if q.answerable]
    crag = float(np.mean([crag_point(q, a) for q, a in zip(data, abstains, strict=True)])) if data else float("nan")
    never = float(np.mean([crag_point(q, False) for q in data])) if data else float("nan")
    return Measure((int(sum(un)), len(un)), (int(sum(ans)), len(ans)), crag, never)


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def transfer_report(root: Path, variant: str, features: tuple[str, ...] = FEATURES) -> str:
    """The transfer table and the shipped fit, as Markdown (the same bytes for the same runs)."""
    warehouse = Warehouse(root)
    data = {c: load_run(warehouse, latest_run(warehouse, f"transfer_{c}", variant)) for c in ("docs", "health")}
    tune = {c: [q for q in qs if q.half == "tune"] for c, qs in data.items()}
    report = {c: [q for q in qs if q.half == "report"] for c, qs in data.items()}
    out = [f"Signals: {', '.join(features)}; penalized logistic fit (L2 {L2}); threshold: the lowest that abstains "
           f"on {RECALL:.0%} of the tune data's unanswerable questions. Figures on report halves only.", ""]
    rows, fits = [], {}
    for fitted, measured in (("docs", "health"), ("health", "docs")):
        fit = fit_calibration(tune[fitted], f"{fitted} tune half", features)
        fits[fitted] = fit
        m = measure(fit.calibration, fit.threshold, report[measured])
        rows.append([f"{fitted} → {measured}", f"{fitted} tune ({fit.n})", f"{fit.threshold:.2f}", *m.row()])
    both = fit_calibration(tune["docs"] + tune["health"], "docs + health tune halves", features)
    for corpus in ("docs", "health"):
        m = measure(both.calibration, both.threshold, report[corpus])
        rows.append([f"both → {corpus}", f"both tune ({both.n})", f"{both.threshold:.2f}", *m.row()])
    out.append(_table(["direction", "fitted on", "threshold", "abstain (unanswerable)", "answer (answerable)",
                       "CRAG", "never abstain"], rows))
    c = both.calibration
    out += ["", "Shipped fit (both tune halves): " + ", ".join(
        [f"intercept={c.intercept}"] + [f"{n}={getattr(c, n)}" for n in SIGNALS if getattr(c, n)])
        + f"; threshold={both.threshold:.2f}, partial_below={both.partial_below:.2f}"]
    for fitted, fit in fits.items():
        c = fit.calibration
        out.append(f"Fit on {fitted}: " + ", ".join([f"intercept={c.intercept}"] + [
            f"{n}={getattr(c, n)}" for n in SIGNALS if getattr(c, n)]) + f"; threshold={fit.threshold:.2f}")
    counts = ", ".join(f"{c} {h}: {sum(q.answerable for q in qs)} answerable + {sum(not q.answerable for q in qs)} not"
                       for c in ("docs", "health") for h, qs in (("tune", tune[c]), ("report", report[c])))
    out += ["", f"Questions: {counts}.", ""]
    return "\n".join(out)

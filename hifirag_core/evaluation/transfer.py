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

import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hifirag_core.evaluation.answerability_set import half_of
from hifirag_core.evidence.answerability import SIGNALS, Calibration
from hifirag_core.evidence.calibrate import fit_logistic
from hifirag_core.store.warehouse import Warehouse

# The signals a fit may read (see ``hifirag_core.evidence.answerability``). The whole question's sentence
# similarity and coverage are left out on purpose: a question in two parts whose evidence covers one part
# scores high on them; the weakest part's signals do not.
CANDIDATE_FEATURES: tuple[str, ...] = ("section", "part_coverage", "part_sentence")
RECALLS: tuple[float, ...] = (0.80, 0.85, 0.90)  # abstention recall the threshold must reach on the fit's data
L2 = 1.0
SURE = 0.95  # share answerable above partial_below
TARGET_ABSTAIN, TARGET_ANSWER = 0.80, 0.95  # issue 26's transfer targets


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

    def x(self, features: tuple[str, ...]) -> list[float]:
        return [float(self.signals.get(f, 0.0)) for f in features]


def latest_run(warehouse: Warehouse, corpus: str, variant: str) -> str:
    """The latest run of one corpus's transfer questions with ``variant`` (by ``hifirag run`` of the question
    file or ``hifirag eval --dataset transfer-<corpus>``: both name it ``custom-transfer_<corpus>-<variant>-``)."""
    rows = warehouse.query("""SELECT run_id FROM runs WHERE starts_with(run_id, ?)
                              ORDER BY finished_at DESC NULLS LAST, started_at DESC LIMIT 1""",
                           [f"custom-transfer_{corpus}-{variant}-"]).rows
    if not rows:
        raise LookupError(f"no run of the {corpus} transfer questions with {variant}: run "
                          f"tools/answerability_transfer.py")
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


def fit_calibration(data: list[Labelled], note: str, features: tuple[str, ...], recall: float, l2: float = L2,
                    sure: float = SURE) -> Fit:
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


@dataclass(frozen=True)
class Choice:
    """A fit's settings (its signals and the recall its threshold aims at) and how they transferred on tune halves."""

    features: tuple[str, ...]
    recall: float
    met: int  # of the four targets (abstain and answer, both ways) met, corpus left out, tune halves
    crag: float  # mean CRAG-style score of both directions, tune halves
    lines: tuple[str, ...]


def choose(tune: dict[str, list[Labelled]]) -> tuple[Choice, list[Choice]]:
    """The signals and recall whose leave-one-corpus-out transfer between the **tune** halves is best: the
    most targets met, then the best CRAG-style score (every subset of the candidate signals, every recall)."""
    choices = []
    subsets = [c for k in range(1, len(CANDIDATE_FEATURES) + 1) for c in itertools.combinations(CANDIDATE_FEATURES, k)]
    for features in subsets:
        for recall in RECALLS:
            met, crags, lines = 0, [], []
            for fitted, measured in (("docs", "health"), ("health", "docs")):
                fit = fit_calibration(tune[fitted], fitted, features, recall)
                m = measure(fit.calibration, fit.threshold, tune[measured])
                met += (m.abstain[0] / m.abstain[1] >= TARGET_ABSTAIN) + (m.answer[0] / m.answer[1] >= TARGET_ANSWER)
                crags.append(m.crag)
                lines.append(f"{fitted} → {measured}: abstain {m.abstain[0] / m.abstain[1]:.3f}, "
                             f"answer {m.answer[0] / m.answer[1]:.3f}, CRAG {m.crag:+.3f}")
            choices.append(Choice(features, recall, met, round(float(np.mean(crags)), 6), tuple(lines)))
    best = max(choices, key=lambda c: (c.met, c.crag, -len(c.features)))
    return best, choices


def _weights(c: Calibration) -> str:
    return ", ".join([f"intercept={c.intercept}"] + [f"{n}={getattr(c, n)}" for n in SIGNALS if getattr(c, n)])


def transfer_report(root: Path, variant: str) -> str:
    """The transfer table and the shipped fit, as Markdown (the same bytes for the same runs)."""
    warehouse = Warehouse(root)
    data = {c: load_run(warehouse, latest_run(warehouse, c, variant)) for c in ("docs", "health")}
    tune = {c: [q for q in qs if q.half == "tune"] for c, qs in data.items()}
    report = {c: [q for q in qs if q.half == "report"] for c, qs in data.items()}
    best, choices = choose(tune)
    features, recall = best.features, best.recall
    out = ["## Choice (tune halves only)", "",
           f"Every subset of {', '.join(CANDIDATE_FEATURES)} and threshold recall {', '.join(map(str, RECALLS))}, "
           "fitted on one corpus's tune half and measured on the other's tune half, both ways:", "",
           _table(["signals", "recall", "targets met", "CRAG (mean)", "directions"],
                  [[", ".join(c.features), f"{c.recall:.2f}", str(c.met), f"{c.crag:+.3f}", "; ".join(c.lines)]
                   for c in choices]), "",
           f"Chosen: {', '.join(features)}, recall {recall:.2f} (most targets met, then CRAG).", "",
           "## Transfer (report halves)", ""]
    rows, fits = [], {}
    for fitted, measured in (("docs", "health"), ("health", "docs")):
        fit = fit_calibration(tune[fitted], f"{fitted} tune half", features, recall)
        fits[fitted] = fit
        m = measure(fit.calibration, fit.threshold, report[measured])
        rows.append([f"{fitted} → {measured}", f"{fitted} tune ({fit.n})", f"{fit.threshold:.2f}", *m.row()])
    both = fit_calibration(tune["docs"] + tune["health"], "docs + health tune halves", features, recall)
    for corpus in ("docs", "health"):
        m = measure(both.calibration, both.threshold, report[corpus])
        rows.append([f"both → {corpus}", f"both tune ({both.n})", f"{both.threshold:.2f}", *m.row()])
    # the docs questions by the answerability set's own halves (a hash of the id), as `hifirag eval --dataset
    # answerability-report` measures them; its questions are partly in the docs tune half above
    by_id = [q for q in data["docs"] if half_of(q.question_id) == "report"]
    m = measure(both.calibration, both.threshold, by_id)
    rows.append(["both → docs answerability-report", f"both tune ({both.n})", f"{both.threshold:.2f}", *m.row()])
    for corpus in ("docs", "health"):  # what the runs themselves decided (the calibration they ran with)
        rows.append([f"as run → {corpus}", "the runs' calibration", "config", *measure_verdicts(report[corpus]).row()])
    out.append(_table(["direction", "fitted on", "threshold", "abstain (unanswerable)", "answer (answerable)",
                       "CRAG", "never abstain"], rows))
    by_origin = []
    for fitted, measured in (("docs", "health"), ("health", "docs")):
        fit = fits[fitted]
        for origin in sorted({q.origin for q in report[measured] if not q.answerable}):
            some = [q for q in report[measured] if q.origin == origin]
            k, n = measure(fit.calibration, fit.threshold, some).abstain
            lo, hi = wilson(k, n)
            by_origin.append([f"{fitted} → {measured}", origin, f"{k / n:.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})"])
    out += ["", "Abstention by where the unanswerable questions come from (report halves):", "",
            _table(["direction", "origin", "abstain"], by_origin)]
    out += ["", f"Shipped fit (both tune halves): {_weights(both.calibration)}; threshold={both.threshold:.2f}, "
                f"partial_below={both.partial_below:.2f}"]
    out += [f"Fit on {fitted}: {_weights(fit.calibration)}; threshold={fit.threshold:.2f}" for fitted, fit in fits.items()]
    counts = ", ".join(f"{c} {h}: {sum(q.answerable for q in qs)} answerable + {sum(not q.answerable for q in qs)} not"
                       for c in ("docs", "health") for h, qs in (("tune", tune[c]), ("report", report[c])))
    met = all(r >= t for fitted in ("docs", "health") for r, t in zip(
        _rates(measure(fits[fitted].calibration, fits[fitted].threshold, report["health" if fitted == "docs" else "docs"])),
        (TARGET_ABSTAIN, TARGET_ANSWER), strict=True))
    out += ["", f"Questions: {counts}.",
            f"Targets (abstain ≥ {TARGET_ABSTAIN}, answer ≥ {TARGET_ANSWER}, corpus left out, both ways): "
            f"{'met' if met else 'not met'}.", ""]
    return "\n".join(out)


def _rates(m: Measure) -> tuple[float, float]:
    return (m.abstain[0] / m.abstain[1], m.answer[0] / m.answer[1])

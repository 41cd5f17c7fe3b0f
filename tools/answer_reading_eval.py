"""Issue 41: does the answerability judgment read for the answer, and does a corpus calibrate itself? Both kinds
of unanswerable, leave one corpus out.

    .venv/bin/python tools/answer_reading_eval.py --out /tmp/i41 --per-corpus 80 --probes 100 --only docs
    .venv/bin/python tools/answer_reading_eval.py --out /tmp/i41 --per-corpus 80 --probes 100 --only health
    .venv/bin/python tools/answer_reading_eval.py --out /tmp/i41 --reuse \
        --docs-calibration warehouse/data/corpus/docs/calibration.json    # report.md, the same bytes again

What it builds, from the shared data only (nothing is fetched):

* **section pools**: the docs corpus's Python and Django pages, sectioned as the corpus build sections them
  (``hifirag_core.sectioning.parse_sections``), and the health site's pages (MedQuAD, one section per
  question-answer pair headed by its question type, as ``transfer_set.page_html`` renders them);
* **questions**: the FAQ questions whose gold section was found (docs), and one question per health page
  group whose page has at least three sections, in a fixed hash order (``--per-corpus`` each, answers of at
  least 20 words);
* **three conditions per question**, each an item:
  - ``answerable``: every section present;
  - ``answer_absent`` (the hard kind, topic present): only the sections that carry the answer leave (the
    gold section; on health also the same question type on the same page group; and any section whose
    words overlap the gold answer's by a Jaccard of 0.7 or more), the rest of the page stays;
  - ``page_out``: the gold page leaves (on health its page group), with every section carrying the answer;
* **the kept sections**: a stand-in for the pipeline's retrieval and ranking (the pages of the BM25-best
  sections, 6 pages, then each page's own best sections by BM25, at most 4 per page and 12 in all, as the
  offline caps keep), so that a few hundred items take minutes, not hours; the answers are not written, so the CRAG-style score counts
  an answer +1 when the gold section was kept (not "kept and cited"), 0 when it abstained, −1 otherwise;
* **signals**: ``self_calibration.signals_of`` over the kept sections (section similarity with MiniLM, the
  answer type with spaCy; the sentence signals, which no calibration reads, are left at 0 to save the time);
* **the corpus's own probes** (``probes-*.jsonl``): ``self_calibration.make_probes`` and ``probe_items`` over
  the same pool, as ``hifirag corpus build`` makes them, the measured questions' pages (page groups) left out
  of the sample so that no probe is one of the questions. Each self-calibration recipe (signals and threshold
  rule, or the shipped weights with only the threshold shifted) is fitted on a corpus's probes alone (no
  label of a real question) and measured on that corpus's tune half; the recipe is chosen there (on both tune
  halves, and on each alone for the corpus-left-out rows), and the report halves are measured once.

Halves: a fixed hash of the question id (``answerability_set.half_of``); the three items of one question are
in the same half. Fits: leave one corpus out, fitted on one corpus's **tune** half, measured on the other's
**report** half; the signals and the threshold's recall are chosen on the tune halves only.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hifirag_core.corpus.sites import SITES, docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.evaluation import transfer  # noqa: E402
from hifirag_core.evaluation.answerability_set import half_of  # noqa: E402
from hifirag_core.evaluation.transfer_set import answer_paragraphs, health_pages, load_medquad, page_groups  # noqa: E402
from hifirag_core.evidence import self_calibration as sc  # noqa: E402
from hifirag_core.evidence.answer_reading import expected_type  # noqa: E402
from hifirag_core.evidence.answerability import CALIBRATION, SIGNALS, Calibration, EvidenceSignals  # noqa: E402
from hifirag_core.evidence.self_calibration import Section, SectionPool  # noqa: E402
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402
from hifirag_core.sectioning import parse_sections  # noqa: E402

MIN_ANSWER_WORDS = 20
CARRY_JACCARD = 0.7
MIN_PAGE_SECTIONS = 3  # a health question's page keeps at least two other sections when its answer leaves
DOCS_SITES = ("python3.11-doc", "python-django-doc")
KINDS = ("answerable", "answer_absent", "page_out")
BASE = ("section", "part_coverage")  # the shipped calibration's signals
NEW = ("window", "answer_window", "answer_type", "contradiction")
RECALLS = (0.80, 0.85, 0.90)
# What the judgment shows and the default does: with these signals a fit reads for the answer (issue 41, item 6)
READING = ("window", "answer_window", "answer_type", "contradiction")
CORPORA = ("docs", "health")
TYPED = "health-typed"  # the health corpus asked only typed questions (MedQuAD's "How many people are affected")
SHIPPED_THRESHOLD = 0.46


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Question:
    question_id: str
    corpus: str
    question: str
    answer: str
    gold: str  # section id
    group: str
    qtype: str = ""


# --- the pools --------------------------------------------------------------------------------------


def docs_pool() -> tuple[list[Section], list[Question]]:
    sections: list[Section] = []
    for name in DOCS_SITES:
        for page in iter_tarball_pages(docs_html_dir() / f"{name}.html.tar.xz"):
            parsed = parse_sections(page.html, page.url)
            for s in parsed.sections:
                if s.text.strip():
                    sections.append(
                        Section(
                            f"{page.url}#{s.anchor or s.section_id}",
                            page.url,
                            page.url,
                            tuple(s.heading_path),
                            s.text,
                        )
                    )
    ids = {s.section_id for s in sections}
    questions = []
    with (shared_data_dir() / "docs_faq" / "faq_qa.jsonl").open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            url = SITES[row["corpus"]].url_for(row["page"])
            gold = f"{url}#{row['anchor']}"
            if gold in ids and len(row["answer"].split()) >= MIN_ANSWER_WORDS:
                questions.append(Question(row["id"], "docs", row["question"], row["answer"], gold, url))
    return sections, questions


def health_pool(qtype: str | None = None) -> tuple[list[Section], list[Question]]:
    pages = health_pages(load_medquad())
    groups = page_groups(pages)
    sections, candidates = [], []
    for page in pages:
        for pair in page.qa:
            sid = f"{page.url}#{pair['anchor']}"
            sections.append(
                Section(
                    sid,
                    page.url,
                    groups[page.url],
                    (page.focus, pair["heading"]),
                    "\n\n".join(answer_paragraphs(pair["answer"])),
                    pair["qtype"],
                )
            )
            if (len(pair["answer"].split()) >= MIN_ANSWER_WORDS and len(page.qa) >= MIN_PAGE_SECTIONS
                    and qtype in (None, pair["qtype"])):
                candidates.append(
                    Question(
                        f"health:{pair['key']}",
                        "health",
                        pair["question"],
                        pair["answer"],
                        sid,
                        groups[page.url],
                        pair["qtype"],
                    )
                )
    one_per_group: dict[str, Question] = {}
    for q in sorted(candidates, key=lambda q: _hash(q.question_id)):
        one_per_group.setdefault(q.group, q)
    return sections, list(one_per_group.values())


# --- retrieval and masks ----------------------------------------------------------------------------


class Pool(SectionPool):
    """The pool with the tool's test of which sections carry a gold answer."""

    def __init__(self, sections: list[Section]):
        super().__init__(sections)
        self.words = [_words(s.text) for s in sections]

    def carriers(self, answer: str) -> set[str]:
        """Sections whose words overlap the answer's by a Jaccard of ``CARRY_JACCARD`` or more (BM25's top 50; at
        0.5 templated health pages, "This table lists symptoms ...", carried one another's answers)."""
        target = _words(answer)
        return {
            self.sections[i].section_id
            for i in self.search(answer[:2000], 50)
            if _jaccard(target, self.words[i]) >= CARRY_JACCARD
        }


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def masks(q: Question, pool: Pool) -> dict[str, set[str]]:
    carriers = pool.carriers(q.answer) | {q.gold}
    absent = set(carriers)
    if q.corpus == "health":  # the same question type on another page of the group carries it too
        absent |= {s.section_id for s in pool.sections if s.group == q.group and s.qtype == q.qtype}
    page = {s.section_id for s in pool.sections if s.group == q.group}
    return {"answerable": set(), "answer_absent": absent, "page_out": page | carriers}


# --- the items --------------------------------------------------------------------------------------


def cached_pool(corpus: str, folder: Path, qtype: str | None = None) -> tuple[list[Section], list[Question]]:
    """The corpus's pool, parsed once and kept as JSON in ``folder`` (sectioning 1,222 pages takes minutes);
    with ``qtype``, the health questions of that MedQuAD question type only."""
    path = folder / f"pool-{corpus}{'-' + qtype if qtype else ''}.json"
    if path.exists():
        raw = json.loads(path.read_text())
        return (
            [Section(**{**s, "heading_path": tuple(s["heading_path"])}) for s in raw["sections"]],
            [Question(**q) for q in raw["questions"]],
        )
    sections, questions = docs_pool() if corpus == "docs" else health_pool(qtype)
    path.write_text(
        json.dumps({"sections": [asdict(s) for s in sections], "questions": [asdict(q) for q in questions]})
    )
    return sections, questions


def selected(questions: list[Question], per_corpus: int) -> list[Question]:
    return sorted(sorted(questions, key=lambda q: _hash(f"i41:{q.question_id}"))[:per_corpus],
                  key=lambda q: q.question_id)


def build_items(corpus: str, per_corpus: int, embedder: Embedder, folder: Path, pool: Pool,
                questions: list[Question]) -> list[dict]:
    items = []
    print(f"{corpus}: {len(pool.sections)} sections, {len(questions)} questions", file=sys.stderr)
    for q in questions:
        for kind, masked in masks(q, pool).items():
            kept = pool.kept(q.question, masked)
            signals = sc.signals_of(q.question, kept, embedder.encode)
            items.append(
                {
                    "id": f"{q.question_id}|{kind}",
                    "question_id": q.question_id,
                    "corpus": corpus,
                    "half": half_of(q.question_id),
                    "kind": kind,
                    "answerable": kind == "answerable",
                    "question": q.question,
                    "gold_kept": any(s.section_id == q.gold for s in kept),
                    "kept": [s.section_id for s in kept],
                    "signals": asdict(signals),
                }
            )
    return items


def build_probes(corpus: str, n: int, embedder: Embedder, pool: Pool, questions: list[Question]) -> list[dict]:
    """The corpus's self-calibration probes over the same pool, as ``hifirag corpus build`` makes them, with the
    measured questions' pages (their page groups) left out of the sample: no probe is one of the questions."""
    groups = {q.group for q in questions}
    skip = {s.url for s in pool.sections if s.group in groups}
    probes = sc.make_probes(pool, n, skip_pages=skip)
    by_id = {p.probe_id: p for p in probes}
    items = sc.probe_items(pool, probes, embedder.encode)
    print(f"{corpus}: {len(probes)} probes ({sum(p.source == 'heading' for p in probes)} from headings)",
          file=sys.stderr)
    return [{**asdict(i), "question": by_id[i.probe_id].question, "source": by_id[i.probe_id].source}
            for i in items]


# --- the measures -----------------------------------------------------------------------------------


def labelled(items: list[dict]) -> list[transfer.Labelled]:
    return [
        transfer.Labelled(
            i["id"], i["corpus"], i["half"], i["kind"], i["answerable"], i["signals"], i["gold_kept"]
        )
        for i in items
    ]


def probe_items(rows: list[dict]) -> list[sc.ProbeItem]:
    return [sc.ProbeItem(r["probe_id"], r["kind"], r["answerable"], r["kept_answer"], r["signals"]) for r in rows]


def auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(an answerable item scores above an unanswerable one), ties half."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def auc_interval(scores: np.ndarray, positive: np.ndarray, rounds: int = 1000) -> tuple[float, float, float]:
    """AUC with a percentile bootstrap 95% interval (fixed seed; resampling positives and negatives apart)."""
    rng = np.random.default_rng(41)
    pos, neg = np.flatnonzero(positive), np.flatnonzero(~positive)
    values = []
    for _ in range(rounds):
        idx = np.concatenate([rng.choice(pos, len(pos)), rng.choice(neg, len(neg))])
        values.append(auc(scores[idx], positive[idx]))
    return auc(scores, positive), float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def scores_of(calibration: Calibration, data: list[transfer.Labelled]) -> np.ndarray:
    return transfer._scores(calibration, data)


def rate(k: int, n: int) -> str:
    lo, hi = transfer.wilson(k, n)
    return f"{k / n:.3f} [{lo:.3f}, {hi:.3f}] ({k}/{n})" if n else "-"


def crag_interval(points: np.ndarray, rounds: int = 1000) -> str:
    """The mean CRAG-style score with a percentile bootstrap 95% interval over questions' items (fixed seed)."""
    rng = np.random.default_rng(41)
    means = [points[rng.integers(0, len(points), len(points))].mean() for _ in range(rounds)]
    return f"{points.mean():+.3f} [{np.percentile(means, 2.5):+.3f}, {np.percentile(means, 97.5):+.3f}]"


def rows_for(name: str, calibration: Calibration, threshold: float, data: list[transfer.Labelled]) -> list[str]:
    p = scores_of(calibration, data)
    abstain = p < threshold
    cells = [name, f"{threshold:.2f}"]
    for kind in ("answer_absent", "page_out"):
        sel = np.array([q.origin == kind for q in data])
        cells.append(rate(int(abstain[sel].sum()), int(sel.sum())))
    ans = np.array([q.answerable for q in data])
    cells.append(rate(int((~abstain[ans]).sum()), int(ans.sum())))
    points = np.array([transfer.crag_point(q, bool(a)) for q, a in zip(data, abstain, strict=True)], float)
    cells.append(crag_interval(points))
    for kind in ("answer_absent", "page_out"):
        sel = np.array([q.answerable or q.origin == kind for q in data])
        a, lo, hi = auc_interval(p[sel], ans[sel])
        cells.append(f"{a:.3f} [{lo:.3f}, {hi:.3f}]")
    return cells


def _met(m: transfer.Measure) -> int:
    return int(m.abstain[0] / m.abstain[1] >= transfer.TARGET_ABSTAIN) + int(
        m.answer[0] / m.answer[1] >= transfer.TARGET_ANSWER)


def choose(tune: dict[str, list[transfer.Labelled]]) -> list[tuple]:
    """Every subset of the candidate signals and recall, fitted on one corpus's tune half and measured on the
    other's, both ways: (mean CRAG, targets met, features, recall), best first."""
    out = []
    candidates = BASE + NEW
    for k in range(1, len(candidates) + 1):
        for features in itertools.combinations(candidates, k):
            for recall in RECALLS:
                met, crags = 0, []
                for fitted, measured in (("docs", "health"), ("health", "docs")):
                    fit = transfer.fit_calibration(tune[fitted], fitted, features, recall)
                    m = transfer.measure(fit.calibration, fit.threshold, tune[measured])
                    met += _met(m)
                    crags.append(m.crag)
                out.append((met, round(float(np.mean(crags)), 6), features, recall))
    # the CRAG-style score first: "targets met" rewards a fit that abstains on everything (both abstain targets
    # met, no answer given), which the score counts as 0 against the positive score of a useful fit
    return sorted(out, key=lambda c: (-c[1], -c[0], len(c[2]), c[2], c[3]))


SHIFT = ("shipped weights",)  # a recipe that keeps the shipped weights and fits only the threshold


def self_fit(recipe: tuple, probes: list[sc.ProbeItem]) -> sc.Fitted:
    features, rule = recipe
    if features == SHIFT:
        return sc.fit(probes, rule=rule, weights=CALIBRATION)
    return sc.fit(probes, features, rule)


def choose_self(tune: dict[str, list[transfer.Labelled]], probes: dict[str, list[sc.ProbeItem]],
                corpora: tuple[str, ...]) -> list[tuple]:
    """Every self-calibration recipe (signals, threshold rule; or the shipped weights with the threshold
    shifted) fitted on each corpus's own probes and measured on that corpus's **tune** half, for ``corpora``:
    (mean CRAG, targets met, recipe), best first."""
    out = []
    candidates = BASE + NEW
    recipes = [(SHIFT, rule) for rule in sc.RULES] + [
        (features, rule) for k in range(1, len(candidates) + 1)
        for features in itertools.combinations(candidates, k) for rule in sc.RULES]
    for recipe in recipes:
        crags, met = [], 0
        for corpus in corpora:
            fitted = self_fit(recipe, probes[corpus])
            m = transfer.measure(fitted.calibration, fitted.threshold, tune[corpus])
            crags.append(m.crag)
            met += _met(m)
        out.append((round(float(np.mean(crags)), 6), met, recipe))
    return sorted(out, key=lambda c: (-c[0], -c[1], len(c[2][0]), c[2]))


def _recipe(recipe: tuple) -> str:
    return f"{', '.join(recipe[0])}; {recipe[1]}"


def report(items: list[dict], probe_rows: dict[str, list[dict]], stored: dict[str, sc.StoredCalibration]) -> str:
    data = labelled(items)
    probes = {c: probe_items(rows) for c, rows in probe_rows.items()}
    sets = [c for c in (*CORPORA, TYPED) if c in probes]
    tune = {c: [q for q in data if q.corpus == c and q.half == "tune"] for c in sets}
    rep = {c: [q for q in data if q.corpus == c and q.half == "report"] for c in sets}
    header = ["calibration", "threshold", "abstain: answer absent", "abstain: page left out", "answer: answerable",
              "CRAG [95% CI]", "AUC vs answer absent", "AUC vs page left out"]
    lines = ["# Issue 41: reading for the answer, self-calibration, both kinds of unanswerable", ""]
    # the self-calibration recipe: chosen on both tune halves, and on each corpus's tune half alone
    both = choose_self(tune, probes, ("docs", "health"))
    alone = {c: choose_self(tune, probes, (c,)) for c in ("docs", "health")}
    reading = next(c for c in both if set(c[2][0]) & set(READING))
    lines += ["## Self-calibration recipes (fitted on each corpus's own probes, chosen on the real questions' "
              "tune halves)", "", "| recipe (signals; threshold rule) | CRAG on both tune halves (mean) | targets "
              "met (of 4) |", "|---|---|---|"]
    lines += [f"| {_recipe(r)} | {c:+.3f} | {m} |" for c, m, r in both[:10]]
    lines += ["", f"Chosen on both tune halves: **{_recipe(both[0][2])}**; the best that reads for the answer: "
              f"{_recipe(reading[2])} ({reading[0]:+.3f}). Chosen on docs tune alone: {_recipe(alone['docs'][0][2])}; "
              f"on health tune alone: {_recipe(alone['health'][0][2])}.", ""]
    for corpus in sets:
        n_heading = sum(r["source"] == "heading" and r["kind"] == "present" for r in probe_rows[corpus])
        n = sum(r["kind"] == "present" for r in probe_rows[corpus])
        lines.append(f"- {corpus} probes: {n} ({n_heading} from question-like headings, {n - n_heading} from "
                     f"sentences), {sum(not r['kept_answer'] for r in probe_rows[corpus] if r['kind'] == 'present')} "
                     "present without their section kept (left out of the fit)")
    # the cross-corpus labelled fit (the earlier table's recipe search, with the new signals among the candidates)
    ranked = choose(tune)
    best_new = next(c for c in ranked if set(c[2]) & set(NEW))
    lines += ["", f"Cross-corpus labelled fit (leave one corpus out on the tune halves): best with a new signal "
              f"{', '.join(best_new[2])}, recall {best_new[3]:.2f} (mean CRAG {best_new[1]:+.3f}); best overall "
              f"{', '.join(ranked[0][2])}, recall {ranked[0][3]:.2f} ({ranked[0][1]:+.3f}).", ""]
    rows, chosen_fits, judgments = [], {}, {}
    for measured in ("docs", "health"):
        other = "health" if measured == "docs" else "docs"
        rows.append(rows_for(f"shipped (issue 26, docs + health labels) → {measured}", CALIBRATION,
                             SHIPPED_THRESHOLD, rep[measured]))
        fitted = self_fit(both[0][2], probes[measured])
        chosen_fits[measured] = fitted
        judgments[f"self-calibrated on {measured}"] = (measured, fitted.calibration, fitted.threshold)
        rows.append(rows_for(f"self-calibrated on {measured}'s probes, recipe from both tune halves → {measured}",
                             fitted.calibration, fitted.threshold, rep[measured]))
        left_out = self_fit(alone[other][0][2], probes[measured])
        rows.append(rows_for(f"self-calibrated on {measured}'s probes, recipe from {other} tune only "
                             f"({_recipe(alone[other][0][2])}) → {measured}", left_out.calibration,
                             left_out.threshold, rep[measured]))
        if measured in stored:
            s = stored[measured]
            rows.append(rows_for(f"the built corpus's calibration.json ({s.name}) → {measured}", s.calibration,
                                 s.threshold, rep[measured]))
            judgments[f"{s.name}"] = (measured, s.calibration, s.threshold)
        _, _, features, recall = best_new
        cross = transfer.fit_calibration(tune[other], other, features, recall)
        rows.append(rows_for(f"labelled fit on {other} tune ({', '.join(features)}, recall {recall:.2f}) → "
                             f"{measured}", cross.calibration, cross.threshold, rep[measured]))
        judgments[f"labelled fit on {other} → {measured}"] = (measured, cross.calibration, cross.threshold)
        shared = transfer.fit_calibration(tune["docs"] + tune["health"], "both", features, recall)
        rows.append(rows_for(f"shared labelled fit on both tune halves (same recipe) → {measured}",
                             shared.calibration, shared.threshold, rep[measured]))
    if TYPED in sets:  # typed questions: the recipe chosen above, and the one chosen on this set's tune half
        typed_best = choose_self(tune, probes, (TYPED,))
        typed_reading = next(c for c in typed_best if set(c[2][0]) & set(READING))
        rows.append(rows_for(f"shipped (issue 26) → {TYPED}", CALIBRATION, SHIPPED_THRESHOLD, rep[TYPED]))
        for label, recipe in (("recipe from docs + health tune", both[0][2]),
                              (f"recipe from {TYPED} tune", typed_best[0][2]),
                              (f"best reading recipe on {TYPED} tune", typed_reading[2])):
            fitted = self_fit(recipe, probes[TYPED])
            rows.append(rows_for(f"self-calibrated on its probes, {label} ({_recipe(recipe)}) → {TYPED}",
                                 fitted.calibration, fitted.threshold, rep[TYPED]))
            judgments[f"self-calibrated, {label} → {TYPED}"] = (TYPED, fitted.calibration, fitted.threshold)
    lines += ["## Report halves", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    counts = ", ".join(f"{c} {h}: {len(qs) // 3} questions" for h, d in (("tune", tune), ("report", rep))
                       for c, qs in d.items())
    lines += ["", f"Items: three per question ({', '.join(KINDS)}); {counts}.", ""]
    for corpus, fitted in chosen_fits.items():
        weights = ", ".join(f"{n} {getattr(fitted.calibration, n):+.3f}" for n in SIGNALS
                            if getattr(fitted.calibration, n))
        lines.append(f"- self-calibration on {corpus}: intercept {fitted.calibration.intercept:+.3f}, {weights}; "
                     f"threshold {fitted.threshold:.2f}")
    lines += [""]
    lines += signal_aucs(rep)
    typed = {c: len({i["question_id"] for i in items if i["corpus"] == c and expected_type(i["question"])})
             for c in sets}
    lines += ["Questions asking for a person, date, place, number or duration (spaCy's signals can only fire on "
              "these): " + ", ".join(f"{c} {n}" for c, n in typed.items()) + ".", ""]
    lines += found_again(data, judgments)
    return "\n".join(lines) + "\n"


def signal_aucs(rep: dict[str, list[transfer.Labelled]]) -> list[str]:
    """Each signal alone: its AUC against each kind of unanswerable, report halves (no fit, nothing tuned)."""
    out = ["## Each signal alone (report halves, AUC with bootstrap 95% interval)", "",
           "| corpus | signal | vs answer absent | vs page left out |", "|---|---|---|---|"]
    for corpus, data in rep.items():
        ans = np.array([q.answerable for q in data])
        for name in BASE + NEW:
            x = np.array([float(q.signals.get(name, 0.0)) for q in data])
            cells = []
            for kind in ("answer_absent", "page_out"):
                sel = np.array([q.answerable or q.origin == kind for q in data])
                a, lo, hi = auc_interval(x[sel], ans[sel], rounds=300)
                cells.append(f"{a:.3f} [{lo:.3f}, {hi:.3f}]")
            out.append(f"| {corpus} | {name} | {cells[0]} | {cells[1]} |")
    return [*out, ""]


def found_again(data: list[transfer.Labelled], judgments: dict[str, tuple[str, Calibration, float]]) -> list[str]:
    """Answerable items (both halves; the half is shown) the shipped calibration abstained on and a new judgment
    answers, with the signal that gives the new score its largest term."""
    out = ["## False abstentions of the shipped judgment that a new one answers", ""]
    for label, (corpus, cal, threshold) in judgments.items():
        for q in (q for q in data if q.corpus == corpus and q.answerable):
            signals = EvidenceSignals(**{n: float(q.signals.get(n, 0.0)) for n in SIGNALS})
            before, after = CALIBRATION.probability(signals), cal.probability(signals)
            if before < SHIPPED_THRESHOLD and after >= threshold:
                parts = {n: getattr(cal, n) * getattr(signals, n) for n in SIGNALS if getattr(cal, n)}
                top = max(parts, key=parts.get)
                shown = ", ".join(f"{n} {getattr(signals, n):.2f}" for n in parts)
                out.append(f"- {label}: {q.question_id.split('|')[0]} ({q.half}): shipped {before:.2f} < 0.46, now "
                           f"{after:.2f} >= {threshold:.2f}; largest term {top}; {shown}; gold kept {q.gold_cited}")
    if len(out) == 2:
        out.append("None.")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-corpus", type=int, default=120)
    parser.add_argument("--probes", type=int, default=sc.PROBES, help="self-calibration probes per corpus")
    parser.add_argument("--only", choices=(*CORPORA, TYPED),
                        help="build this set's items only (one process each); health-typed is the health corpus "
                             "asked only questions of --health-qtype")
    parser.add_argument("--reuse", action="store_true", help="read the items from --out instead of building them")
    parser.add_argument("--health-qtype", default="frequency",
                        help="with --only health-typed: the MedQuAD question type of the typed set (how many people "
                             "are affected: a number the answer-type signal can look for)")
    parser.add_argument("--docs-calibration", type=Path,
                        help="a built docs corpus's calibration.json, measured on the docs questions too")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for corpus in [args.only] if args.only else list(CORPORA):
        path, probe_path = args.out / f"items-{corpus}.jsonl", args.out / f"probes-{corpus}.jsonl"
        if not (args.reuse and path.exists() and probe_path.exists()):
            sections, questions = (cached_pool("health", args.out, args.health_qtype) if corpus == TYPED
                                   else cached_pool(corpus, args.out))
            pool, chosen = Pool(sections), selected(questions, args.per_corpus)
            embedder = Embedder(args.out / f"vectors-{corpus}.sqlite")
            built = build_items(corpus, args.per_corpus, embedder, args.out, pool, chosen)
            path.write_text("".join(json.dumps(i, sort_keys=True) + "\n" for i in built))
            probes = build_probes(corpus, args.probes, embedder, pool, chosen)
            probe_path.write_text("".join(json.dumps(i, sort_keys=True) + "\n" for i in probes))
    if args.only:
        return
    sets = [c for c in (*CORPORA, TYPED) if (args.out / f"items-{c}.jsonl").exists()]
    items = [json.loads(line) for c in sets for line in (args.out / f"items-{c}.jsonl").read_text().splitlines()]
    probe_rows = {c: [json.loads(line) for line in (args.out / f"probes-{c}.jsonl").read_text().splitlines()]
                  for c in sets}
    stored = {"docs": sc.read_calibration(args.docs_calibration.read_bytes())} if args.docs_calibration else {}
    text = report(items, probe_rows, stored)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

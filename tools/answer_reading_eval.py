"""Issue 41: does the answerability judgment read for the answer? Both kinds of unanswerable, leave one corpus out.

    .venv/bin/python tools/answer_reading_eval.py --out /tmp/i41 --per-corpus 60   # items-*.jsonl, report.md

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
* **signals**: ``answerability.evidence_signals`` over the kept sections (section similarity with MiniLM; the
  sentence signals, which the shipped calibration does not read, are left at 0 to save the time).

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
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hifirag_core.corpus.sites import SITES, docs_html_dir, iter_tarball_pages  # noqa: E402
from hifirag_core.evaluation import transfer  # noqa: E402
from hifirag_core.evaluation.answerability_set import half_of  # noqa: E402
from hifirag_core.evaluation.transfer_set import answer_paragraphs, health_pages, load_medquad, page_groups  # noqa: E402
from hifirag_core.evidence.answerability import (  # noqa: E402
    CALIBRATION,
    LEAD_CHARS,
    SIGNALS,
    Calibration,
    evidence_signals,
)
from hifirag_core.resources import shared_data_dir  # noqa: E402
from hifirag_core.retrieval.embeddings import Embedder  # noqa: E402
from hifirag_core.retrieval.scoring import bm25_scores  # noqa: E402
from hifirag_core.sectioning import parse_sections  # noqa: E402
from hifirag_core.types import SourceDoc, SourceSection  # noqa: E402

MIN_ANSWER_WORDS = 20
PAGES, PER_PAGE, TOTAL = 6, 4, 12  # the offline caps: pages read, sections kept per page and in all
CARRY_JACCARD = 0.7
MIN_PAGE_SECTIONS = 3  # a health question's page keeps at least two other sections when its answer leaves
DOCS_SITES = ("python3.11-doc", "python-django-doc")
KINDS = ("answerable", "answer_absent", "page_out")
BASE = ("section", "part_coverage")  # the shipped calibration's signals
NEW = ("window", "answer_type", "contradiction")
RECALLS = (0.80, 0.85, 0.90)
SHIPPED_THRESHOLD = 0.46


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True)
class Section:
    section_id: str
    url: str
    group: str  # the page group (docs: the page)
    heading_path: tuple[str, ...]
    text: str
    qtype: str = ""


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


def health_pool() -> tuple[list[Section], list[Question]]:
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
            if len(pair["answer"].split()) >= MIN_ANSWER_WORDS and len(page.qa) >= MIN_PAGE_SECTIONS:
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


class Pool:
    def __init__(self, sections: list[Section]):
        self.sections = sections
        self.by_id = {s.section_id: s for s in sections}
        self.by_page: dict[str, list[Section]] = {}
        for s in sections:
            self.by_page.setdefault(s.url, []).append(s)
        self.stemmer = Stemmer.Stemmer("english")
        self.words = [_words(s.text) for s in sections]
        texts = [" > ".join(s.heading_path) + "\n" + s.text[:4000] for s in sections]
        self.index = bm25s.BM25()
        self.index.index(
            bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False),
            show_progress=False,
        )

    def search(self, query: str, k: int) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.index.retrieve(tokens, k=min(k, len(self.sections)), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

    def carriers(self, answer: str) -> set[str]:
        """Sections whose words overlap the answer's by a Jaccard of ``CARRY_JACCARD`` or more (BM25's top 50; at
        0.5 templated health pages, "This table lists symptoms ...", carried one another's answers)."""
        target = _words(answer)
        return {
            self.sections[i].section_id
            for i in self.search(answer[:2000], 50)
            if _jaccard(target, self.words[i]) >= CARRY_JACCARD
        }

    def kept(self, query: str, masked: set[str]) -> list[Section]:
        """As the pipeline keeps them: the pages of the best sections (``PAGES``), then each page's own best
        sections by BM25 (at most ``PER_PAGE``, ``TOTAL`` in all), so a page found keeps its other sections."""
        pages: list[str] = []
        for i in self.search(query, 200):
            s = self.sections[i]
            if s.section_id not in masked and s.url not in pages:
                pages.append(s.url)
            if len(pages) == PAGES:
                break
        out: list[Section] = []
        for url in pages:
            mine = [s for s in self.by_page[url] if s.section_id not in masked]
            if not mine:
                continue
            scores = bm25_scores(query, [" > ".join(s.heading_path) + "\n" + s.text[:4000] for s in mine])
            order = sorted(range(len(mine)), key=lambda k: (-scores[k], k))[:PER_PAGE]
            out += [mine[k] for k in sorted(order) if scores[k] > 0 or k == order[0]]
        return out[:TOTAL]


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


def sources_of(kept: list[Section]) -> list[SourceDoc]:
    by_url: dict[str, list[Section]] = {}
    for s in kept:
        by_url.setdefault(s.url, []).append(s)
    return [
        SourceDoc(
            i,
            url,
            ss[0].heading_path[0] if ss[0].heading_path else url,
            "",
            tuple(SourceSection(s.section_id, s.heading_path, s.text) for s in ss),
        )
        for i, (url, ss) in enumerate(by_url.items(), 1)
    ]


# --- the items --------------------------------------------------------------------------------------


def cached_pool(corpus: str, folder: Path) -> tuple[list[Section], list[Question]]:
    """The corpus's pool, parsed once and kept as JSON in ``folder`` (sectioning 1,222 pages takes minutes)."""
    path = folder / f"pool-{corpus}.json"
    if path.exists():
        raw = json.loads(path.read_text())
        return (
            [Section(**{**s, "heading_path": tuple(s["heading_path"])}) for s in raw["sections"]],
            [Question(**q) for q in raw["questions"]],
        )
    sections, questions = docs_pool() if corpus == "docs" else health_pool()
    path.write_text(
        json.dumps({"sections": [asdict(s) for s in sections], "questions": [asdict(q) for q in questions]})
    )
    return sections, questions


def build_items(corpus: str, per_corpus: int, embedder: Embedder, folder: Path) -> list[dict]:
    items = []
    sections, questions = cached_pool(corpus, folder)
    pool = Pool(sections)
    questions = sorted(questions, key=lambda q: _hash(f"i41:{q.question_id}"))[:per_corpus]
    print(f"{corpus}: {len(sections)} sections, {len(questions)} questions", file=sys.stderr)
    for q in sorted(questions, key=lambda q: q.question_id):
        for kind, masked in masks(q, pool).items():
            kept = pool.kept(q.question, masked)
            sources = sources_of(kept)
            signals = evidence_signals(q.question, sources, lambda _q, texts: np.zeros(len(texts)))
            leads = [f"{' > '.join(s.heading_path) or '(untitled)'}: {s.text[:LEAD_CHARS]}" for s in kept]
            section = (
                float(np.max(embedder.encode(leads) @ embedder.encode_one(q.question))) if leads else 0.0
            )
            signals = replace(signals, section=round(section, 4))
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


# --- the measures -----------------------------------------------------------------------------------


def labelled(items: list[dict]) -> list[transfer.Labelled]:
    return [
        transfer.Labelled(
            i["id"], i["corpus"], i["half"], i["kind"], i["answerable"], i["signals"], i["gold_kept"]
        )
        for i in items
    ]


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


def rows_for(
    name: str, calibration: Calibration, threshold: float, data: list[transfer.Labelled]
) -> list[str]:
    p = scores_of(calibration, data)
    abstain = p < threshold
    cells = [name, f"{threshold:.2f}"]
    for kind in ("answer_absent", "page_out"):
        sel = np.array([q.origin == kind for q in data])
        cells.append(rate(int(abstain[sel].sum()), int(sel.sum())))
    ans = np.array([q.answerable for q in data])
    cells.append(rate(int((~abstain[ans]).sum()), int(ans.sum())))
    crag = np.mean([transfer.crag_point(q, bool(a)) for q, a in zip(data, abstain, strict=True)])
    cells.append(f"{crag:+.3f}")
    for kind in ("answer_absent", "page_out"):
        sel = np.array([q.answerable or q.origin == kind for q in data])
        a, lo, hi = auc_interval(p[sel], ans[sel])
        cells.append(f"{a:.3f} [{lo:.3f}, {hi:.3f}]")
    return cells


def choose(tune: dict[str, list[transfer.Labelled]]) -> list[tuple]:
    """Every subset of the candidate signals and recall, fitted on one corpus's tune half and measured on the
    other's, both ways: (targets met, mean CRAG, features, recall), best first."""
    out = []
    candidates = BASE + NEW
    for k in range(1, len(candidates) + 1):
        for features in itertools.combinations(candidates, k):
            for recall in RECALLS:
                met, crags = 0, []
                for fitted, measured in (("docs", "health"), ("health", "docs")):
                    fit = transfer.fit_calibration(tune[fitted], fitted, features, recall)
                    m = transfer.measure(fit.calibration, fit.threshold, tune[measured])
                    met += (m.abstain[0] / m.abstain[1] >= transfer.TARGET_ABSTAIN) + (
                        m.answer[0] / m.answer[1] >= transfer.TARGET_ANSWER
                    )
                    crags.append(m.crag)
                out.append((met, round(float(np.mean(crags)), 6), features, recall))
    # the CRAG-style score first: "targets met" rewards a fit that abstains on everything (both abstain targets
    # met, no answer given), which the score counts as 0 against the positive score of a useful fit
    return sorted(out, key=lambda c: (-c[1], -c[0], len(c[2]), c[2], c[3]))


def report(items: list[dict]) -> str:
    data = labelled(items)
    tune = {c: [q for q in data if q.corpus == c and q.half == "tune"] for c in ("docs", "health")}
    rep = {c: [q for q in data if q.corpus == c and q.half == "report"] for c in ("docs", "health")}
    ranked = choose(tune)
    best_new = next(c for c in ranked if set(c[2]) & set(NEW))
    best_base = next(c for c in ranked if set(c[2]) <= set(BASE))
    ranked_shown = ranked[:12] + [c for c in ranked[12:] if c[2] == BASE][:1]
    header = [
        "calibration",
        "threshold",
        "abstain: answer absent",
        "abstain: page left out",
        "answer: answerable",
        "CRAG",
        "AUC vs answer absent",
        "AUC vs page left out",
    ]
    lines = [
        "## Choice (tune halves only, leave one corpus out)",
        "",
        "Ranked by the CRAG-style score (mean of both ways), then the targets met.",
        "",
        "| signals | recall | targets met (of 4) | CRAG (mean of both ways) |",
        "|---|---|---|---|",
    ]
    lines += [f"| {', '.join(f)} | {r:.2f} | {m} | {c:+.3f} |" for m, c, f, r in ranked_shown]
    lines += [
        "",
        f"Best with a new signal: {', '.join(best_new[2])}, recall {best_new[3]:.2f}; best of the "
        f"shipped signals alone: {', '.join(best_base[2])}, recall {best_base[3]:.2f}.",
        "",
    ]
    rows = []
    for measured in ("docs", "health"):
        fitted = "health" if measured == "docs" else "docs"
        rows.append(
            rows_for(
                f"shipped (docs + health, issue 26) → {measured}",
                CALIBRATION,
                SHIPPED_THRESHOLD,
                rep[measured],
            )
        )
        for label, (_, _, features, recall) in (("topic only", best_base), ("with answer reading", best_new)):
            fit = transfer.fit_calibration(tune[fitted], fitted, features, recall)
            rows.append(
                rows_for(
                    f"{label} ({', '.join(features)}), {fitted} → {measured}",
                    fit.calibration,
                    fit.threshold,
                    rep[measured],
                )
            )
    lines += ["## Report halves", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    counts = ", ".join(
        f"{c} {h}: {len(qs) // 3} questions"
        for h, d in (("tune", tune), ("report", rep))
        for c, qs in d.items()
    )
    lines += ["", f"Items: three per question ({', '.join(KINDS)}); {counts}.", ""]
    lines += signal_aucs(rep)
    lines += found_again(data, tune, best_new)
    return "\n".join(lines) + "\n"


def signal_aucs(rep: dict[str, list[transfer.Labelled]]) -> list[str]:
    """Each signal alone: its AUC against each kind of unanswerable, report halves (no fit, nothing tuned)."""
    out = [
        "## Each signal alone (report halves, AUC with bootstrap 95% interval)",
        "",
        "| corpus | signal | vs answer absent | vs page left out |",
        "|---|---|---|---|",
    ]
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


def found_again(data: list[transfer.Labelled], tune: dict, best: tuple) -> list[str]:
    """Answerable items the shipped calibration abstained on and the new fit (on the other corpus) answers: both
    halves of the corpus left out (its tune half took part in choosing the signals, never in this fit)."""
    _, _, features, recall = best
    out = [
        "## Answerable questions the shipped judgment abstained on and the new one answers (corpus left out, "
        "both halves)",
        "",
    ]
    for measured in ("docs", "health"):
        fit = transfer.fit_calibration(tune["health" if measured == "docs" else "docs"], "", features, recall)
        for q in (q for q in data if q.corpus == measured and q.answerable):
            before = CALIBRATION.probability(transfer._signals(q))
            after = fit.calibration.probability(transfer._signals(q))
            if before < SHIPPED_THRESHOLD and after >= fit.threshold:
                shown = ", ".join(
                    f"{n} {q.signals.get(n, 0):.2f}" for n in SIGNALS if getattr(fit.calibration, n)
                )
                out.append(
                    f"- {q.question_id.split('|')[0]} ({q.half}): before {before:.2f}, after {after:.2f} "
                    f"(threshold {fit.threshold:.2f}); gold kept {q.gold_cited}; {shown}"
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--per-corpus", type=int, default=120)
    parser.add_argument(
        "--only", choices=("docs", "health"), help="build this corpus's items only (two processes)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="read the items from --out instead of building them"
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for corpus in [args.only] if args.only else ["docs", "health"]:
        path = args.out / f"items-{corpus}.jsonl"
        if not (args.reuse and path.exists()):
            built = build_items(
                corpus, args.per_corpus, Embedder(args.out / f"vectors-{corpus}.sqlite"), args.out
            )
            path.write_text("".join(json.dumps(i, sort_keys=True) + "\n" for i in built))
    if args.only:
        return
    items = [
        json.loads(line)
        for c in ("docs", "health")
        for line in (args.out / f"items-{c}.jsonl").read_text().splitlines()
    ]
    text = report(items)
    (args.out / "report.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()

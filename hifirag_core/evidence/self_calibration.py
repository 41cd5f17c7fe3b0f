"""A corpus calibrates its own answerability judgment, with no labels: probes made from its own pages.

Issue 41: weights fitted on documentation and health pages said "the sources do not answer" on an
encyclopedia where they did. A corpus now asks itself questions it knows the answers to:

* **probes** (:func:`make_probes`): from a sample of its pages (a fixed hash order of their URLs, pages
  with at least two sections), one question per page: a heading that asks a question ("How do I
  ...?"), else a sentence turned into a query. A sentence with a date, a person, a place or a number
  (spaCy's recogniser) becomes a when / who / where / how-many question without that entity; any other
  becomes "What about" and its keywords;
* each probe is asked three ways (:func:`probe_items`), over a stand-in of the pipeline's retrieval
  (:class:`SectionPool`): **present** (nothing masked; an answerable item when the section it came from
  is kept), **section_masked** (the section that carries the answer, and any other holding the same
  sentence or heading, masked; the rest of the page kept: the topic present and the answer absent) and
  **page_masked** (the whole page masked);
* **the fit** (:func:`fit`): a logistic regression of present against masked over the recipe's
  signals, then a threshold by the recipe's rule, chosen on the tune halves of the docs and health
  questions (``tools/answer_reading_eval.py``: section similarity alone, and the lowest threshold that
  abstains on 80% of the masked probes). A corpus's own probes say where its answers score.

The stored calibration (:func:`calibration_file`) is canonical JSON with no time in it: the same pages,
code and models give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace

import bm25s
import numpy as np
import Stemmer

from hifirag_core.evidence import entities
from hifirag_core.evidence.answerability import (
    LEAD_CHARS,
    SIGNALS,
    Calibration,
    EvidenceSignals,
    evidence_signals,
)
from hifirag_core.evidence.calibrate import fit_logistic
from hifirag_core.retrieval.scoring import bm25_scores
from hifirag_core.text import is_block, question_keywords, split_sentences
from hifirag_core.types import SourceDoc, SourceSection

VERSION = 1  # of the probes, the fit and the file: part of the stored calibration
PROBES = 120  # probes per corpus by default (three items each)
PAGES, PER_PAGE, TOTAL = 6, 4, 12  # the offline caps: pages read, sections kept per page and in all
# The recipe the corpus fits, chosen on the tune halves (docs/evaluation.md, "Self-calibration"): its
# signals, and its threshold rule.
FEATURES: tuple[str, ...] = ("section",)
RULE = "recall@0.80"
RULES = ("answer@0.95", "answer@0.90", "recall@0.80", "youden")
L2 = 1.0
SURE = 0.95  # share of probes answerable above partial_below
KINDS = ("present", "section_masked", "page_masked")
MIN_KEYWORDS = 4  # a sentence turned into a query needs this many keywords
_ASKS = re.compile(r"^(?:how|what|why|when|where|who|which|can|could|does|do|is|are|should|may|will)\b", re.I)
_NUMBERING = re.compile(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z]\.)\s+")
# spaCy label -> the asking word of the question a sentence becomes without that entity
_ASK_FOR = (("DATE", "When"), ("PERSON", "Who"), ("GPE", "Where"), ("LOC", "Where"), ("CARDINAL", "How many"),
            ("QUANTITY", "How much"), ("PERCENT", "What percentage"))
_BEFORE = re.compile(r"\b(?:in|on|at|by|since|from|during|of|about|around|some|nearly|over|under)\s*$", re.I)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


# --- the pool and its retrieval ---------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    section_id: str
    url: str
    group: str  # the page group (a page of its own unless the caller groups pages)
    heading_path: tuple[str, ...]
    text: str
    qtype: str = ""


class SectionPool:
    """A corpus's sections with a stand-in of the pipeline's retrieval and ranking (:meth:`kept`)."""

    def __init__(self, sections: list[Section]):
        self.sections = sections
        self.by_id = {s.section_id: s for s in sections}
        self.by_page: dict[str, list[Section]] = {}
        for s in sections:
            self.by_page.setdefault(s.url, []).append(s)
        self.stemmer = Stemmer.Stemmer("english")
        texts = [" > ".join(s.heading_path) + "\n" + s.text[:4000] for s in sections]
        self.index = bm25s.BM25()
        self.index.index(bm25s.tokenize(texts, stopwords="en", stemmer=self.stemmer, show_progress=False),
                         show_progress=False)

    def search(self, query: str, k: int) -> list[int]:
        tokens = bm25s.tokenize([query], stopwords="en", stemmer=self.stemmer, show_progress=False)
        if not tokens.vocab:
            return []
        docs, scores = self.index.retrieve(tokens, k=min(k, len(self.sections)), show_progress=False)
        return [int(d) for d, s in zip(docs[0], scores[0], strict=True) if s > 0]

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


def sources_of(kept: list[Section]) -> list[SourceDoc]:
    """The kept sections as the pipeline hands them on: one source per page, in order."""
    by_url: dict[str, list[Section]] = {}
    for s in kept:
        by_url.setdefault(s.url, []).append(s)
    return [SourceDoc(i, url, ss[0].heading_path[0] if ss[0].heading_path else url, "",
                      tuple(SourceSection(s.section_id, s.heading_path, s.text) for s in ss))
            for i, (url, ss) in enumerate(by_url.items(), 1)]


Encode = Callable[[list[str]], np.ndarray]  # texts -> normalized MiniLM vectors, one row each


def signals_of(question: str, kept: list[Section], encode: Encode) -> EvidenceSignals:
    """The evidence signals over ``kept``, the section similarity by MiniLM; the sentence signals (which no
    calibration weighs) are left at 0, which saves encoding every kept sentence."""
    signals = evidence_signals(question, sources_of(kept), lambda _q, texts: np.zeros(len(texts)))
    leads = [f"{' > '.join(s.heading_path) or '(untitled)'}: {s.text[:LEAD_CHARS]}" for s in kept]
    if not leads:
        return signals
    vectors = encode([question, *leads])
    return replace(signals, section=round(float(np.max(vectors[1:] @ vectors[0])), 4))


# --- the probes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    probe_id: str
    question: str
    section_id: str  # the section that carries its answer
    url: str
    source: str  # "heading" | "sentence"
    carried_by: tuple[str, ...] = ()  # other sections holding the same heading or sentence


def _heading_question(section: Section) -> str | None:
    heading = _NUMBERING.sub("", section.heading_path[-1] if section.heading_path else "").strip()
    if (heading.endswith("?") or _ASKS.match(heading)) and len(question_keywords(heading)) >= 2:
        return heading if heading.endswith("?") else heading + "?"
    return None


def sentence_question(sentence: str) -> str | None:
    """A sentence turned into a query: without its first date, person, place or number, asked for it;
    else "What about" its keywords. None when it has fewer than ``MIN_KEYWORDS`` keywords."""
    sentence = sentence.strip().rstrip(".!;:")
    if len(question_keywords(sentence)) < MIN_KEYWORDS:
        return None
    found = entities.spans(sentence)
    for label, ask in _ASK_FOR:
        span = next((text for text, lab in found if lab == label), None)
        if span is None:
            continue
        head, _, tail = sentence.partition(span)
        rest = " ".join(f"{_BEFORE.sub('', head).strip(' ,')} {tail.strip(' ,')}".split())
        if len(question_keywords(rest)) >= 2:
            return f"{ask} {rest}?"
    return "What about " + " ".join(question_keywords(sentence)[:8]) + "?"


def _sentences(section: Section) -> list[str]:
    return [s for s in split_sentences(section.text)[:12] if not is_block(s) and 8 <= len(s.split()) <= 40]


def make_probes(pool: SectionPool, n: int = PROBES, skip_pages: Iterable[str] = ()) -> list[Probe]:
    """Up to ``n`` probes, one per page, pages in a fixed hash order of their URL (``skip_pages`` left out)."""
    skip = set(skip_pages)
    probes: list[Probe] = []
    for url in sorted(pool.by_page, key=lambda u: _hash(f"probe-page:{u}")):
        if len(probes) >= n:
            break
        sections = [s for s in pool.by_page[url] if s.text.strip()]
        if url in skip or len(sections) < 2:
            continue
        probe = _page_probe(pool, url, sections)
        if probe is not None:
            probes.append(probe)
    return probes


def _page_probe(pool: SectionPool, url: str, sections: list[Section]) -> Probe | None:
    for s in sorted(sections, key=lambda s: _hash(f"probe-section:{s.section_id}")):
        asked = _heading_question(s)
        if asked:
            same = {i for i in pool.search(asked, 50) if pool.sections[i].heading_path[-1:] == s.heading_path[-1:]}
            return Probe(_hash(f"probe:{s.section_id}:heading")[:16], asked, s.section_id, url, "heading",
                         tuple(sorted(pool.sections[i].section_id for i in same) if same else ()))
    for s in sorted(sections, key=lambda s: _hash(f"probe-sentence:{s.section_id}")):
        for sentence in _sentences(s):
            asked = sentence_question(sentence)
            if asked:
                same = {pool.sections[i].section_id for i in pool.search(sentence, 50)
                        if sentence in pool.sections[i].text}
                return Probe(_hash(f"probe:{s.section_id}:{sentence}")[:16], asked, s.section_id, url, "sentence",
                             tuple(sorted(same)))
    return None


@dataclass(frozen=True)
class ProbeItem:
    probe_id: str
    kind: str  # present | section_masked | page_masked
    answerable: bool  # present, with its section kept
    kept_answer: bool  # the section carrying the answer was kept
    signals: dict[str, float] = field(default_factory=dict)


def probe_items(pool: SectionPool, probes: Sequence[Probe], encode: Encode,
                progress: Callable[[int], None] | None = None) -> list[ProbeItem]:
    """Each probe asked three ways (present, section masked, page masked), with its evidence signals."""
    items = []
    for n, probe in enumerate(probes, 1):
        carriers = {probe.section_id, *probe.carried_by}
        page = {s.section_id for s in pool.by_page[probe.url]}
        for kind, masked in (("present", set()), ("section_masked", carriers), ("page_masked", page | carriers)):
            kept = pool.kept(probe.question, masked)
            found = any(s.section_id == probe.section_id for s in kept)
            items.append(ProbeItem(probe.probe_id, kind, kind == "present" and found, found,
                                   asdict(signals_of(probe.question, kept, encode))))
        if progress:
            progress(n)
    return items


# --- the fit ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    calibration: Calibration
    threshold: float
    partial_below: float


def _x(signals: dict[str, float], features: Sequence[str]) -> list[float]:
    return [float(signals.get(f, 0.0)) for f in features]


def fit_items(items: Sequence[ProbeItem]) -> list[ProbeItem]:
    """The items a fit reads: every masked one, and a present one only when its answer's section was kept."""
    return [i for i in items if i.kind != "present" or i.answerable]


def threshold_for(p: np.ndarray, y: np.ndarray, rule: str) -> float:
    """The threshold ``rule`` picks on scores ``p`` of items labelled ``y`` (0.01 steps):

    * ``answer@R``: the highest that still answers ``R`` of the answerable items;
    * ``recall@R``: the lowest that abstains on ``R`` of the unanswerable ones;
    * ``youden``: the one with the largest answer rate + abstain rate."""
    grid = np.arange(0.01, 1.0, 0.01).round(2)
    pos, neg = p[y == 1], p[y == 0]
    kind, _, value = rule.partition("@")
    if kind == "answer":
        ok = [t for t in grid if (pos >= t).mean() >= float(value)]
        return float(max(ok)) if ok else 0.01
    if kind == "recall":
        return float(next((t for t in grid if (neg < t).mean() >= float(value)), 0.99))
    if kind == "youden":
        return float(max(grid, key=lambda t: ((pos >= t).mean() + (neg < t).mean(), -t)))
    raise ValueError(f"unknown threshold rule {rule!r}; known: {', '.join(RULES)}")


def fit(items: Sequence[ProbeItem], features: Sequence[str] = FEATURES, rule: str = RULE, name: str = "",
        weights: Calibration | None = None) -> Fitted:
    """The calibration fitted on the probe ``items`` (present against masked), or, given ``weights``, those
    weights with only the threshold fitted (a shift)."""
    data = fit_items(items)
    y = np.array([1.0 if i.answerable else 0.0 for i in data])
    if weights is None:
        x = np.array([_x(i.signals, features) for i in data])
        w = fit_logistic(x, y, L2)
        fitted = {f: round(float(v), 3) for f, v in zip(features, w[1:], strict=True)}
        calibration = Calibration(intercept=round(float(w[0]), 3), note=f"self-calibrated on {len(data)} probe items",
                                  **({name: 0.0 for name in SIGNALS} | fitted))
    else:
        calibration = replace(weights, note=f"{weights.note}; threshold shifted on {len(data)} probe items")
    calibration = replace(calibration, name=name or calibration.name)
    p = np.array([calibration.probability(EvidenceSignals(**i.signals)) for i in data])
    threshold = threshold_for(p, y, rule)
    order = np.argsort(-p, kind="stable")
    partial_below = next((float(math.ceil(p[order[k - 1]] * 100) / 100) for k in range(len(order), 0, -1)
                          if y[order[:k]].mean() >= SURE), 1.0)
    return Fitted(calibration, threshold, max(threshold, partial_below))


# --- the stored calibration -------------------------------------------------------------------------


def calibration_file(fitted: Fitted, probes: Sequence[Probe], items: Sequence[ProbeItem], *, corpus: str,
                     fingerprint: str, features: Sequence[str] = FEATURES, rule: str = RULE) -> bytes:
    """The calibration as stored beside the corpus: canonical JSON, no time in it."""
    data = fit_items(items)
    p = np.array([fitted.calibration.probability(EvidenceSignals(**i.signals)) for i in data])
    answered = p >= fitted.threshold
    on_probes = {}
    for kind in KINDS:
        sel = np.array([i.kind == kind for i in data], dtype=bool)
        hits = answered[sel] if kind == "present" else ~answered[sel]
        on_probes[("answered" if kind == "present" else "abstained") + f"_{kind}"] = [int(hits.sum()), int(sel.sum())]
    cal = fitted.calibration
    body = {
        "version": VERSION,
        "corpus": corpus,
        "corpus_fingerprint": fingerprint,
        "recipe": {"features": list(features), "rule": rule, "l2": L2},
        "weights": {"intercept": cal.intercept, **{f: getattr(cal, f) for f in features}},
        "threshold": fitted.threshold,
        "partial_below": fitted.partial_below,
        "probes": {"n": len(probes), "from_headings": sum(p.source == "heading" for p in probes),
                   "from_sentences": sum(p.source == "sentence" for p in probes), "items_fitted": len(data),
                   "present_without_their_section": sum(i.kind == "present" and not i.kept_answer for i in items),
                   "sha256": hashlib.sha256(probes_jsonl(probes, items)).hexdigest()},
        "on_probes": on_probes,
    }
    return (json.dumps(body, indent=1, sort_keys=True) + "\n").encode()


def probes_jsonl(probes: Sequence[Probe], items: Sequence[ProbeItem]) -> bytes:
    """Every probe with its three items' signals, one JSON line per probe (stored beside the calibration)."""
    by_probe: dict[str, list[ProbeItem]] = {}
    for i in items:
        by_probe.setdefault(i.probe_id, []).append(i)
    lines = [json.dumps({**asdict(p), "items": [asdict(i) for i in by_probe.get(p.probe_id, [])]}, sort_keys=True)
             for p in probes]
    return ("\n".join(lines) + "\n").encode()


@dataclass(frozen=True)
class StoredCalibration:
    """A corpus's own calibration as read back: what the answerability stage uses, and its name."""

    calibration: Calibration
    threshold: float
    partial_below: float
    corpus_fingerprint: str
    summary: dict

    @property
    def name(self) -> str:
        return self.calibration.name


def read_calibration(data: bytes) -> StoredCalibration:
    """The stored calibration; its name is ``corpus:<corpus>@<the file's sha256, first 12>``."""
    body = json.loads(data)
    if body.get("version") != VERSION:
        raise ValueError(f"calibration version {body.get('version')!r}, this code reads {VERSION}")
    weights = body["weights"]
    name = f"corpus:{body['corpus']}@{hashlib.sha256(data).hexdigest()[:12]}"
    weighed = {name: 0.0 for name in SIGNALS} | {k: v for k, v in weights.items() if k != "intercept"}
    calibration = Calibration(intercept=weights["intercept"], note=f"self-calibrated ({body['recipe']})", name=name,
                              **weighed)
    return StoredCalibration(calibration, body["threshold"], body["partial_below"], body["corpus_fingerprint"], body)


def describe(stored: StoredCalibration) -> str:
    """The calibration in a few lines, as ``hifirag corpus build`` prints it."""
    s = stored.summary
    weights = ", ".join(f"{k} {v:+.3f}" for k, v in sorted(s["weights"].items(), key=lambda kv: kv[0] != "intercept"))
    probes = s["probes"]
    shown = "; ".join(f"{k.replace('_', ' ')} {a}/{b}" for k, (a, b) in s["on_probes"].items())
    return (f"Answerability calibration {stored.name}: {weights}; threshold {s['threshold']:.2f}, partial below "
            f"{s['partial_below']:.2f} (rule {s['recipe']['rule']})\n"
            f"  fitted on {probes['n']} probes from its own pages ({probes['from_headings']} question-like headings, "
            f"{probes['from_sentences']} sentences turned into queries), {probes['items_fitted']} items; on them: {shown}")

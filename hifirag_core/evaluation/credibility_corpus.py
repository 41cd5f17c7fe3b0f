"""The credibility experiment's corpus: renditions of MedQuAD answers, some corrupted, under seven source types.

* **Queries.** ``n_queries`` MedQuAD questions (answer of at least ``min_answer_chars``), one per
  focus, drawn with a fixed seed. Each falls in the ``tune`` or the ``report`` half by a fixed
  hash of its id (``query_half``).
* **Documents.** Every document is a *rendition* of one MedQuAD answer (see ``synthetic.py``):
  3 to 10 renditions of each query's own answer, renditions of another question of the same page
  (close distractors), and background renditions of other pages. Each rendition's source type is
  drawn from ``type_shares``, independently of everything else about it.
* **Corruption.** Each rendition has a faithful text and a corrupted text (changed dose, negated
  claim or wrong date) and a uniform draw ``u``; it is corrupted when ``u`` is below its type's
  rate at the chosen correlation (``corruption_rates``). The same draws serve every correlation,
  so corpora at two correlations differ only in which documents are corrupted.
* **Labels** (``labels.py``) come from each document's own record: relevant when it answers the
  query's question, correct when it is not corrupted. The source type enters neither.

All ids live in the namespace ``CORPUS_NAMESPACE``; the corpus is built in memory for the
experiment and never written into any other corpus.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hifirag_core.credibility.source_types import classify_source
from hifirag_core.evaluation.credibility_labels import correctness_labels, relevance_labels
from hifirag_core.evaluation.credibility_synthetic import (
    CORPUS_TYPES,
    LOW_CREDIBILITY_TYPES,
    corrupt,
    excerpt,
    frame,
    paraphrase,
    synthetic_url,
)
from hifirag_core.hashing import stable_hash
from hifirag_core.text import normalize_ws

CORPUS_NAMESPACE = "credibility-medquad-renditions"
Half = Literal["tune", "report"]

# How a health question's result list splits over source types. An assumption (no survey of
# search results by these seven types was found); every share is above zero so that every type
# holds both faithful and corrupted documents at any correlation short of total.
DEFAULT_TYPE_SHARES: dict[str, float] = {
    "government": 0.25, "peer_reviewed": 0.10, "established_news": 0.15, "organization_report": 0.15,
    "blog": 0.12, "user_generated": 0.13, "ai_generated": 0.10,
}
# Share of each type's documents that assert something false: the "realistic" point of the
# correlation parameter. Assumptions, anchored where we found a measurement (docs/credibility.md
# gives the sources): guideline recommendations go out of date (Shekelle 2001: 10% of AHRQ
# guidelines out of date within 3.6 years), abstracts misstate data (Pitkin 1999: 18-68% of
# abstracts, mostly minor), chatbot answers to physicians' questions were mostly or completely
# wrong in 36 of 284 (Johnson et al. 2023 preprint, 12.7%), and social-media misinformation
# prevalence varies widely by topic and platform (Suarez-Lledo 2021, a review of 69 studies).
REALISTIC_RATES: dict[str, float] = {
    "government": 0.05, "peer_reviewed": 0.05, "established_news": 0.10, "organization_report": 0.07,
    "blog": 0.25, "user_generated": 0.30, "ai_generated": 0.15,
}


@dataclass(frozen=True)
class Rendition:
    """One document before a correlation is chosen: both texts and the draw that decides between them."""

    doc_id: str
    url: str
    title: str
    faithful_text: str
    corrupted_text: str
    focus: str
    question_key: str  # which question it answers (normalised question text)
    source_type: str  # from the URL rules, as for any page without metadata
    origin_doc_id: str  # the MedQuAD page it comes from
    origin_qid: str  # the MedQuAD question whose answer it renders
    corruption: str  # the edit its corrupted text carries: dose | negation | date
    changes: tuple[str, ...]
    draw: float  # uniform in [0, 1): corrupted when below its type's rate


@dataclass(frozen=True)
class CorpusDoc:
    """One document of a corpus at one correlation."""

    doc_id: str
    url: str
    title: str
    text: str
    focus: str
    question_key: str
    source_type: str
    origin_doc_id: str
    origin_qid: str
    corrupted: bool
    corruption: str | None  # the edit, when corrupted
    changes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    """A MedQuAD question used as a query, and the half of the query set it falls in."""

    query_id: str
    text: str
    qtype: str
    focus: str
    question_key: str
    half: Half


@dataclass(frozen=True)
class CorpusSpec:
    """The knobs of corpus construction (a slice of the experiment config)."""

    seed: int = 13
    n_queries: int = 600
    min_answer_chars: int = 200
    renditions: tuple[int, int] = (3, 10)  # per query question, drawn uniformly in this range
    sibling_questions: int = 1  # other questions of the query's page, rendered as close distractors
    sibling_renditions: int = 2
    n_background: int = 500
    excerpt_sentences: tuple[int, int] = (2, 4)
    type_shares: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_TYPE_SHARES))
    realistic_rates: Mapping[str, float] = field(default_factory=lambda: dict(REALISTIC_RATES))
    realistic_at: float = 0.5  # the correlation at which the rates are REALISTIC_RATES


@dataclass(frozen=True)
class CorpusPlan:
    """Renditions and queries, shared by the corpora at every correlation."""

    renditions: list[Rendition]
    queries: list[Query]
    fingerprint: str


@dataclass
class ExperimentCorpus:
    """Documents and queries at one correlation, with the labels and the rates that produced them."""

    docs: list[CorpusDoc]
    queries: list[Query]
    correlation: float
    rates: dict[str, float]
    fingerprint: str
    namespace: str = CORPUS_NAMESPACE
    relevant: dict[str, frozenset[str]] = field(init=False)  # query id -> ids of documents answering it
    correct: dict[str, bool] = field(init=False)  # doc id -> not corrupted
    doc_index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.doc_index = {d.doc_id: i for i, d in enumerate(self.docs)}
        if len(self.doc_index) != len(self.docs):
            raise ValueError("duplicate document ids in the experiment corpus")
        self.relevant = relevance_labels(self.docs, self.queries)
        self.correct = correctness_labels(self.docs)

    @property
    def corrupted_ids(self) -> frozenset[str]:
        return frozenset(d.doc_id for d in self.docs if d.corrupted)


def focus_key(focus: str) -> str:
    """Foci compared case- and whitespace-insensitively (MedQuAD repeats a focus across collections)."""
    return normalize_ws(focus).lower()


def clean_question(question: str) -> str:
    """MedQuAD's "What is (are) X ?" without the space before the question mark."""
    return normalize_ws(question).replace(" ?", "?")


def question_key(question: str) -> str:
    """The identity of a question: its cleaned text, lower-cased (two pages can ask the same)."""
    return clean_question(question).lower()


def query_half(query_id: str) -> Half:
    """``tune`` or ``report`` by a fixed hash of the query id, so the split never depends on the sample."""
    return "tune" if int(stable_hash(["credibility-half", query_id]), 16) % 2 == 0 else "report"


def iter_medquad(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of ``medquad_docs.jsonl.gz``, each with a unique ``key``.

    MedQuAD's own ``doc_id`` is not unique (CancerGov repeats ids for several foci of one page,
    collections reuse numbers, one id is null), so the key is ``medquad:<collection>:<doc_id>``
    with ``~n`` appended to repeats in file order.
    """
    seen: Counter[str] = Counter()
    with gzip.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            row = json.loads(line)
            base = row.get("doc_id") or (row["qa"][0]["qid"].split("-")[0] if row.get("qa") else "none")
            key = f"medquad:{row.get('collection', '')}:{base}"
            seen[key] += 1
            row["key"] = key if seen[key] == 1 else f"{key}~{seen[key]}"
            yield row


def corruption_rates(correlation: float, shares: Mapping[str, float], realistic: Mapping[str, float],
                     realistic_at: float = 0.5) -> dict[str, float]:
    """Each type's corruption rate at ``correlation`` in [0, 1], the overall rate held fixed.

    Piecewise linear through three anchors: 0 (none) gives every type the overall rate of the
    realistic point; ``realistic_at`` gives the realistic rates; 1 (total, the old corpus) puts
    all corruption in the low-credibility types (blog, forum, AI chat), none elsewhere.
    """
    if not 0.0 <= correlation <= 1.0:
        raise ValueError(f"correlation must be in [0, 1], got {correlation}")
    if not 0.0 < realistic_at < 1.0:
        raise ValueError(f"realistic_at must be in (0, 1), got {realistic_at}")
    unknown = sorted((set(shares) | set(realistic)) - set(CORPUS_TYPES))
    if unknown or set(shares) != set(realistic):
        raise ValueError(f"shares and rates must name the same types among {CORPUS_TYPES}; check {unknown or 'both'}")
    total_share = sum(shares.values())
    mean = sum(shares[t] * realistic[t] for t in shares) / total_share
    low_share = sum(shares[t] for t in shares if t in LOW_CREDIBILITY_TYPES) / total_share
    if mean > low_share:
        raise ValueError(f"an overall corruption rate of {mean:.3f} cannot sit in the low-credibility types "
                         f"alone (their share is {low_share:.3f}); lower the rates or raise those shares")
    none = {t: mean for t in shares}
    total = {t: mean / low_share if t in LOW_CREDIBILITY_TYPES else 0.0 for t in shares}
    if correlation <= realistic_at:
        a, b, w = none, realistic, correlation / realistic_at
    else:
        a, b, w = realistic, total, (correlation - realistic_at) / (1.0 - realistic_at)
    return {t: (1.0 - w) * a[t] + w * b[t] for t in shares}


def embedding_text(doc: CorpusDoc, max_chars: int) -> str:
    """What gets embedded: the title and the first ``max_chars`` characters of the text."""
    return f"{doc.title}\n{doc.text[:max_chars]}"


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator that depends only on the seed and a document's identity, not on build order."""
    return random.Random(int(stable_hash([seed, *parts]), 16))


_BODY = "\x00body\x00"  # where the faithful or the corrupted body goes in a frame


def make_rendition(row: Mapping[str, Any], qa: Mapping[str, Any], serial: int, spec: CorpusSpec) -> Rendition:
    """One rendition of one answer: type, excerpt, frame, URL, its corruption and its draw."""
    doc_id = f"credx:{row['key'].removeprefix('medquad:')}:{qa['qid']}:{serial}"
    rng = _rng(spec.seed, doc_id)
    draw = rng.random()
    types = sorted(spec.type_shares)
    source_type = rng.choices(types, weights=[spec.type_shares[t] for t in types])[0]
    start = 0 if rng.random() < 0.6 else 1
    body = paraphrase(excerpt(qa["answer"], rng.randint(*spec.excerpt_sentences), start))
    false = corrupt(body, rng)
    focus, question = normalize_ws(row["focus"]), clean_question(qa["question"])
    title, template = frame(source_type, focus, question, _BODY, rng)
    url = synthetic_url(source_type, title, rng)
    classified = classify_source(url)  # the rules, as for any page without metadata
    if classified != source_type:  # a URL shape the rules read otherwise: fix the shape, not the label
        raise ValueError(f"synthetic {source_type} URL {url} classifies as {classified}")
    return Rendition(doc_id=doc_id, url=url, title=title, faithful_text=template.replace(_BODY, body),
                     corrupted_text=template.replace(_BODY, false.text), focus=focus,
                     question_key=question_key(qa["question"]), source_type=classified, origin_doc_id=row["key"],
                     origin_qid=qa["qid"], corruption=false.kind or "negation", changes=false.changes, draw=draw)


def plan_corpus(path: Path, spec: CorpusSpec) -> CorpusPlan:
    """Queries and every rendition, all determined by ``spec.seed``."""
    rows = sorted(iter_medquad(path), key=lambda r: r["key"])

    def eligible(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return [qa for qa in row["qa"] if len(normalize_ws(qa["answer"])) >= spec.min_answer_chars]

    by_focus: dict[str, Mapping[str, Any]] = {}
    for row in rows:  # one page per focus, the first by key, so queries never share a topic
        if eligible(row):
            by_focus.setdefault(focus_key(row["focus"]), row)
    if len(by_focus) < spec.n_queries:
        raise ValueError(f"only {len(by_focus)} foci have an answer of {spec.min_answer_chars}+ characters; "
                         f"lower n_queries (now {spec.n_queries}) or min_answer_chars")
    query_rows = random.Random(spec.seed).sample(sorted(by_focus.values(), key=lambda r: r["key"]), spec.n_queries)
    queries: list[Query] = []
    renditions: list[Rendition] = []
    for row in query_rows:
        rng = _rng(spec.seed, "query", row["key"])
        qa = rng.choice(eligible(row))
        query_id = f"{row['key']}#{qa['qid']}"
        queries.append(Query(query_id, clean_question(qa["question"]), qa["qtype"], normalize_ws(row["focus"]),
                             question_key(qa["question"]), query_half(query_id)))
        renditions += [make_rendition(row, qa, i, spec) for i in range(rng.randint(*spec.renditions))]
        siblings = [s for s in eligible(row) if question_key(s["question"]) != question_key(qa["question"])]
        for sibling in rng.sample(siblings, min(spec.sibling_questions, len(siblings))):
            renditions += [make_rendition(row, sibling, i, spec) for i in range(spec.sibling_renditions)]
    query_foci = {focus_key(r["focus"]) for r in query_rows}
    others = [r for r in rows if eligible(r) and focus_key(r["focus"]) not in query_foci]
    for row in random.Random(spec.seed + 1).sample(others, min(spec.n_background, len(others))):
        renditions.append(make_rendition(row, _rng(spec.seed, "background", row["key"]).choice(eligible(row)), 0, spec))
    fingerprint = stable_hash({
        "spec": dataclasses.asdict(spec), "source": path.name,
        "docs": [(r.doc_id, r.url, stable_hash(r.faithful_text), stable_hash(r.corrupted_text)) for r in renditions],
        "queries": [q.query_id for q in queries],
    })
    return CorpusPlan(renditions, queries, fingerprint)


def realize(plan: CorpusPlan, correlation: float, spec: CorpusSpec) -> ExperimentCorpus:
    """The corpus at one correlation: each rendition faithful or corrupted by its draw and its type's rate."""
    rates = corruption_rates(correlation, spec.type_shares, spec.realistic_rates, spec.realistic_at)
    docs = []
    for r in plan.renditions:
        corrupted = r.draw < rates[r.source_type]
        docs.append(CorpusDoc(
            doc_id=r.doc_id, url=r.url, title=r.title, text=r.corrupted_text if corrupted else r.faithful_text,
            focus=r.focus, question_key=r.question_key, source_type=r.source_type, origin_doc_id=r.origin_doc_id,
            origin_qid=r.origin_qid, corrupted=corrupted, corruption=r.corruption if corrupted else None,
            changes=r.changes if corrupted else (),
        ))
    return ExperimentCorpus(docs, list(plan.queries), correlation, rates, plan.fingerprint)


def build_corpus(path: Path, spec: CorpusSpec, correlation: float) -> ExperimentCorpus:
    """Plan and realise the corpus at one correlation."""
    return realize(plan_corpus(path, spec), correlation, spec)


def type_counts(docs: Sequence[CorpusDoc]) -> Counter[tuple[str, bool]]:
    """Documents by (source type, corrupted)."""
    return Counter((d.source_type, d.corrupted) for d in docs)

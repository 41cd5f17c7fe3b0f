"""The credibility experiment's corpus: MedQuAD pages, synthetic low-credibility copies, queries, labels.

* **Originals.** Each MedQuAD document (an NIH/CDC page, ``source_type`` "government" in its
  metadata) is rendered with headings from its structure: the focus as the title (``# focus``),
  each question as a ``##`` heading with its answer below.
* **Queries.** ``n_queries`` documents are drawn with a fixed seed; one of each document's
  questions (with an answer of at least ``min_answer_chars``) becomes a query, and that document
  is its gold document.
* **Synthetic copies** (a controlled setting, see ``synthetic.py``): for every query, adversarial
  copies of the gold document's queried answer (claims changed) and faithful copies of one of
  its answers, plus faithful copies of other documents so low-credibility pages are not found
  only next to queries. Each copy's platform (forum, blog, AI chat) is drawn per document.
* **Labels**, two schemes:
  ``topical`` (primary): grade 2 for the gold document, 1 for every other non-adversarial
  document with the same focus whatever its source, 0 otherwise; adversarial documents are never
  relevant. This keeps relevance independent of source type, as the paper requires.
  ``government_only``: the literal reading "the question's own document and MedQuAD documents
  with the same focus"; faithful copies count as not relevant. It rewards the prior for
  demoting them and shows how much of a gain labels that correlate with source type can create.

All ids live in the namespace ``CORPUS_NAMESPACE``; the corpus is built in memory for the
experiment and never written into any other corpus.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from hifirag_core.credibility.sources import classify_source
from hifirag_core.credibility.synthetic import (
    LOW_CREDIBILITY_TYPES,
    excerpt,
    frame,
    make_misleading,
    paraphrase,
    synthetic_url,
)
from hifirag_core.hashing import stable_hash
from hifirag_core.text import normalize_ws

CORPUS_NAMESPACE = "credibility-medquad-synthetic"
LABEL_SCHEMES: tuple[str, ...] = ("topical", "government_only")
DocKind = Literal["original", "faithful", "adversarial"]


@dataclass(frozen=True)
class CorpusDoc:
    """One document of the experiment corpus."""

    doc_id: str
    url: str
    title: str
    text: str  # markdown-like: headings from the document's structure
    focus: str
    source_type: str  # explicit metadata for originals, the URL rules for copies
    kind: DocKind
    origin_doc_id: str  # the MedQuAD document it comes from (itself for originals)
    origin_qid: str | None = None  # the question whose answer a copy was made from
    changes: tuple[str, ...] = ()  # what an adversarial copy made false

    @property
    def adversarial(self) -> bool:
        return self.kind == "adversarial"


@dataclass(frozen=True)
class Query:
    """A MedQuAD question used as a query, with its gold document."""

    query_id: str
    text: str
    qtype: str
    focus: str
    gold_doc_id: str


@dataclass(frozen=True)
class CorpusSpec:
    """The knobs of corpus construction (a slice of the experiment config)."""

    seed: int = 13
    max_source_docs: int | None = None
    n_queries: int = 300
    min_answer_chars: int = 200
    adversarial_per_query: int = 1
    faithful_per_query: int = 1
    n_distractor_copies: int = 1000
    copy_sentences: int = 5


@dataclass
class ExperimentCorpus:
    """Documents, queries and both label schemes, with the corpus fingerprint."""

    docs: list[CorpusDoc]
    queries: list[Query]
    labels: dict[str, dict[str, dict[str, float]]]  # scheme -> query id -> doc id -> grade
    data_fingerprint: str
    namespace: str = CORPUS_NAMESPACE
    doc_index: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.doc_index = {d.doc_id: i for i, d in enumerate(self.docs)}
        if len(self.doc_index) != len(self.docs):
            raise ValueError("duplicate document ids in the experiment corpus")

    @property
    def adversarial_ids(self) -> frozenset[str]:
        return frozenset(d.doc_id for d in self.docs if d.adversarial)


def focus_key(focus: str) -> str:
    """Foci compared case- and whitespace-insensitively (MedQuAD repeats a focus across collections)."""
    return normalize_ws(focus).lower()


def clean_question(question: str) -> str:
    """MedQuAD's "What is (are) X ?" without the space before the question mark."""
    return normalize_ws(question).replace(" ?", "?")


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


def render_original(row: Mapping[str, Any]) -> CorpusDoc:
    """A MedQuAD row as a document: focus as title, each question a heading over its answer."""
    focus = normalize_ws(row["focus"])
    parts = [f"# {focus}"]
    for qa in row["qa"]:
        parts.append(f"## {clean_question(qa['question'])}")
        parts.append(normalize_ws(qa["answer"]))
    return CorpusDoc(
        doc_id=row["key"],
        url=row["url"],
        title=focus,
        text="\n\n".join(parts),
        focus=focus,
        source_type=classify_source(row["url"], row.get("source_type")),
        kind="original",
        origin_doc_id=row["key"],
    )


def embedding_text(doc: CorpusDoc, max_chars: int) -> str:
    """What gets embedded: the title and the first ``max_chars`` characters of the text.

    Bounded because MiniLM reads at most 256 tokens anyway and long inputs cost the most time;
    the title is kept in full so every document is represented by its topic.
    """
    return f"{doc.title}\n{doc.text[:max_chars]}"


def _rng(seed: int, *parts: str) -> random.Random:
    """A generator that depends only on the seed and a document's identity, not on build order."""
    return random.Random(int(stable_hash([seed, *parts]), 16))


def make_copy(row: Mapping[str, Any], qa: Mapping[str, Any], kind: DocKind, seed: int, serial: int,
              n_sentences: int) -> CorpusDoc:
    """A faithful or adversarial copy of one answer, framed and addressed as a low-credibility page."""
    rng = _rng(seed, kind, row["key"], qa["qid"], str(serial))
    source_type = rng.choice(LOW_CREDIBILITY_TYPES)
    focus = normalize_ws(row["focus"])
    body = paraphrase(excerpt(qa["answer"], n_sentences))
    changes: tuple[str, ...] = ()
    if kind == "adversarial":
        misleading = make_misleading(body, rng)
        body, changes = misleading.text, misleading.changes
    title, text = frame(source_type, focus, clean_question(qa["question"]), body, rng)
    url = synthetic_url(source_type, title, rng)
    prefix = "adv" if kind == "adversarial" else "copy"
    return CorpusDoc(
        doc_id=f"credx:{prefix}:{row['key'].removeprefix('medquad:')}:{qa['qid']}:{serial}",
        url=url,
        title=title,
        text=text,
        focus=focus,
        source_type=classify_source(url),  # the rules, as for any page without metadata
        kind=kind,
        origin_doc_id=row["key"],
        origin_qid=qa["qid"],
        changes=changes,
    )


def build_corpus(path: Path, spec: CorpusSpec) -> ExperimentCorpus:
    """Originals, queries, synthetic copies and labels, all determined by ``spec.seed``."""
    rows = sorted(iter_medquad(path), key=lambda r: r["key"])
    if spec.max_source_docs is not None and spec.max_source_docs < len(rows):
        rows = sorted(random.Random(spec.seed).sample(rows, spec.max_source_docs), key=lambda r: r["key"])
    originals = [render_original(r) for r in rows]

    def eligible_qas(row: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        return [qa for qa in row["qa"] if len(normalize_ws(qa["answer"])) >= spec.min_answer_chars]

    candidates = [r for r in rows if eligible_qas(r)]
    if len(candidates) < spec.n_queries:
        raise ValueError(f"only {len(candidates)} documents have an answer of {spec.min_answer_chars}+ "
                         f"characters; lower n_queries (now {spec.n_queries}) or min_answer_chars")
    query_rows = random.Random(spec.seed + 1).sample(candidates, spec.n_queries)
    queries: list[Query] = []
    copies: list[CorpusDoc] = []
    for row in query_rows:
        rng = _rng(spec.seed, "query", row["key"])
        qa = rng.choice(eligible_qas(row))
        queries.append(Query(f"{row['key']}#{qa['qid']}", clean_question(qa["question"]), qa["qtype"],
                             normalize_ws(row["focus"]), row["key"]))
        for serial in range(spec.adversarial_per_query):
            copies.append(make_copy(row, qa, "adversarial", spec.seed, serial, spec.copy_sentences))
        for serial in range(spec.faithful_per_query):
            source_qa = rng.choice(eligible_qas(row))
            copies.append(make_copy(row, source_qa, "faithful", spec.seed, serial, spec.copy_sentences))
    query_keys = {r["key"] for r in query_rows}
    others = [r for r in candidates if r["key"] not in query_keys]
    distractors = random.Random(spec.seed + 2).sample(others, min(spec.n_distractor_copies, len(others)))
    for row in distractors:
        qa = _rng(spec.seed, "distractor", row["key"]).choice(eligible_qas(row))
        copies.append(make_copy(row, qa, "faithful", spec.seed, 0, spec.copy_sentences))
    docs = originals + copies
    fingerprint = stable_hash({"spec": dataclasses.asdict(spec), "source": path.name,
                               "docs": [(d.doc_id, d.url, stable_hash(d.text)) for d in docs]})
    return ExperimentCorpus(docs, queries, build_labels(docs, queries), fingerprint)


def build_labels(docs: Sequence[CorpusDoc], queries: Sequence[Query]) -> dict[str, dict[str, dict[str, float]]]:
    """Graded labels per query under both schemes (see the module docstring)."""
    by_focus: dict[str, list[CorpusDoc]] = defaultdict(list)
    for doc in docs:
        by_focus[focus_key(doc.focus)].append(doc)
    labels: dict[str, dict[str, dict[str, float]]] = {scheme: {} for scheme in LABEL_SCHEMES}
    for query in queries:
        same_focus = by_focus.get(focus_key(query.focus), [])
        topical = {d.doc_id: 1.0 for d in same_focus if not d.adversarial}
        government = {d.doc_id: 1.0 for d in same_focus if d.kind == "original"}
        for grades in (topical, government):
            grades[query.gold_doc_id] = 2.0
        labels["topical"][query.query_id] = topical
        labels["government_only"][query.query_id] = government
    return labels

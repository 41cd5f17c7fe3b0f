"""Labels of the credibility experiment, each read from one document's own record.

* **relevant** (query, document): the document answers the query's question (same normalised
  question text), whatever its source.
* **correct** (document): its text carries no corruption.
* **hit** (query, document): relevant and correct.

No label reads the source type or another document's label; ``values_by_type`` and
``labels_fixed_by_type`` let a test check that no label is a function of the source type alone.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Protocol

LABELS: tuple[str, ...] = ("relevant", "correct", "hit")


class LabelledDoc(Protocol):
    doc_id: str
    question_key: str
    source_type: str
    corrupted: bool


class LabelledQuery(Protocol):
    query_id: str
    question_key: str


def relevance_labels(docs: Sequence[LabelledDoc], queries: Sequence[LabelledQuery]) -> dict[str, frozenset[str]]:
    """Per query, the ids of the documents that answer its question."""
    answering: dict[str, set[str]] = defaultdict(set)
    for doc in docs:
        answering[doc.question_key].add(doc.doc_id)
    return {q.query_id: frozenset(answering.get(q.question_key, ())) for q in queries}


def correctness_labels(docs: Sequence[LabelledDoc]) -> dict[str, bool]:
    """Per document, True when its text is faithful to the source answer."""
    return {d.doc_id: not d.corrupted for d in docs}


def hit_ids(relevant: frozenset[str], correct: Mapping[str, bool]) -> frozenset[str]:
    """The documents that are relevant to a query and correct."""
    return frozenset(d for d in relevant if correct[d])


def values_by_type(docs: Sequence[LabelledDoc], queries: Sequence[LabelledQuery],
                   relevant: Mapping[str, frozenset[str]], correct: Mapping[str, bool]) -> dict[str, dict[str, set[bool]]]:
    """For each label and source type, the values the label takes on that type's documents.

    Query-document labels count every pair: a type's pairs with no relevant document are False.
    """
    out: dict[str, dict[str, set[bool]]] = {label: defaultdict(set) for label in LABELS}
    per_type = Counter(d.source_type for d in docs)
    type_of = {d.doc_id: d.source_type for d in docs}
    relevant_pairs: Counter[str] = Counter()
    hit_pairs: Counter[str] = Counter()
    for doc in docs:
        out["correct"][doc.source_type].add(correct[doc.doc_id])
    for query in queries:
        for doc_id in relevant[query.query_id]:
            relevant_pairs[type_of[doc_id]] += 1
            hit_pairs[type_of[doc_id]] += correct[doc_id]
    for source_type, n_docs in per_type.items():
        pairs = n_docs * len(queries)
        for label, positives in (("relevant", relevant_pairs[source_type]), ("hit", hit_pairs[source_type])):
            if positives:
                out[label][source_type].add(True)
            if positives < pairs:
                out[label][source_type].add(False)
    return {label: dict(by_type) for label, by_type in out.items()}


def labels_fixed_by_type(docs: Sequence[LabelledDoc], queries: Sequence[LabelledQuery],
                         relevant: Mapping[str, frozenset[str]], correct: Mapping[str, bool]) -> list[str]:
    """The labels that take a single value within every source type: a function of the type alone."""
    values = values_by_type(docs, queries, relevant, correct)
    return [label for label in LABELS if all(len(v) == 1 for v in values[label].values())]

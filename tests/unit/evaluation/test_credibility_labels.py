"""Labels independent of the source type: relevance from the question a document answers,
correctness from its corruption record, a hit when both, whatever its type."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path

import pytest

from hifirag_core.evaluation.credibility_corpus import (
    CorpusDoc,
    CorpusSpec,
    ExperimentCorpus,
    plan_corpus,
    realize,
)
from hifirag_core.evaluation.credibility_labels import (
    correctness_labels,
    hit_ids,
    labels_fixed_by_type,
    relevance_labels,
    values_by_type,
)
from hifirag_core.evaluation.credibility_synthetic import CORPUS_TYPES, LOW_CREDIBILITY_TYPES
from tests.support.credibility_helpers import medquad_path

SENTENCES = ("{f} is inherited in an autosomal recessive pattern.", "It affects about 1 in 3,500 newborns.",
             "Symptoms usually begin in early childhood.", "Treatment may include 500 mg of antibiotics.",
             "Doctors can confirm {f} with a blood test.")


@pytest.fixture(scope="module")
def medquad_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sixty MedQuAD-shaped pages, two questions each: enough documents of every type without the shared data."""
    rows = []
    for i in range(60):
        focus = f"Condition {i}"
        answer = " ".join(s.format(f=focus) for s in SENTENCES)
        rows.append({"doc_id": str(i), "collection": "T", "url": f"https://www.nih.gov/{i}", "focus": focus,
                     "source_type": "government",
                     "qa": [{"qid": f"{i}-{j}", "qtype": "information", "question": f"Question {j} on {focus} ?",
                             "answer": answer} for j in range(2)]})
    path = tmp_path_factory.mktemp("medquad") / "medquad_docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


def _corpora(path: Path, n_queries: int) -> dict[float, ExperimentCorpus]:
    spec = CorpusSpec(seed=5, n_queries=n_queries, min_answer_chars=100, n_background=20)
    plan = plan_corpus(path, spec)
    return {c: realize(plan, c, spec) for c in (0.0, 0.25, 0.5, 0.75, 1.0)}


def _assert_no_label_is_a_function_of_type(corpus: ExperimentCorpus) -> None:
    assert labels_fixed_by_type(corpus.docs, corpus.queries, corpus.relevant, corpus.correct) == []
    values = values_by_type(corpus.docs, corpus.queries, corpus.relevant, corpus.correct)
    for label in ("relevant", "hit"):  # every type answers some queries and not others
        assert all(v == {True, False} for v in values[label].values()), (corpus.correlation, label, values[label])
    correct = values["correct"]
    if corpus.correlation < 1.0:  # every type holds faithful and corrupted documents
        assert all(v == {True, False} for v in correct.values()), (corpus.correlation, correct)
    else:  # total: no corruption outside the low-credibility types, both values inside them
        assert all(correct[t] == ({True, False} if t in LOW_CREDIBILITY_TYPES else {True}) for t in correct)


def test_no_label_is_a_function_of_source_type(medquad_like: Path) -> None:
    for corpus in _corpora(medquad_like, 50).values():
        assert set(d.source_type for d in corpus.docs) == set(CORPUS_TYPES)
        _assert_no_label_is_a_function_of_type(corpus)


@pytest.mark.shared_data
def test_no_label_is_a_function_of_source_type_on_medquad() -> None:
    for corpus in _corpora(medquad_path(), 120).values():
        _assert_no_label_is_a_function_of_type(corpus)


def test_the_check_catches_labels_derived_from_the_type(medquad_like: Path) -> None:
    corpus = _corpora(medquad_like, 50)[0.5]
    by_type_correct = {d.doc_id: d.source_type not in LOW_CREDIBILITY_TYPES for d in corpus.docs}
    assert labels_fixed_by_type(corpus.docs, corpus.queries, corpus.relevant, by_type_correct) == ["correct"]
    government = frozenset(d.doc_id for d in corpus.docs if d.source_type == "government")
    by_type_relevant = {q.query_id: government for q in corpus.queries}  # the old "government_only" reading
    assert labels_fixed_by_type(corpus.docs, corpus.queries, by_type_relevant, corpus.correct) == ["relevant"]


def test_labels_do_not_change_when_source_types_are_reassigned(medquad_like: Path) -> None:
    corpus = _corpora(medquad_like, 50)[0.5]
    rotated = [dataclasses.replace(d, source_type=CORPUS_TYPES[(CORPUS_TYPES.index(d.source_type) + 1) % 7])
               for d in corpus.docs]
    assert relevance_labels(rotated, corpus.queries) == corpus.relevant
    assert correctness_labels(rotated) == corpus.correct


def test_a_documents_labels_ignore_every_other_document(medquad_like: Path) -> None:
    corpus = _corpora(medquad_like, 50)[0.5]
    query = corpus.queries[0]
    doc = next(d for d in corpus.docs if d.doc_id in corpus.relevant[query.query_id])
    flipped: list[CorpusDoc] = [d if d is doc else dataclasses.replace(d, corrupted=not d.corrupted)
                                for d in corpus.docs]
    assert correctness_labels(flipped)[doc.doc_id] == corpus.correct[doc.doc_id]
    alone = relevance_labels([doc], [query])[query.query_id]
    assert alone == {doc.doc_id}
    assert (doc.doc_id in hit_ids(corpus.relevant[query.query_id], corpus.correct)) == (not doc.corrupted)

"""Synthetic copies: reproducible with a seed, adversarial copies really change claims; corpus labels."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest

from hifirag_core.credibility.corpus import (
    CORPUS_NAMESPACE,
    CorpusSpec,
    build_corpus,
    embedding_text,
    iter_medquad,
    make_copy,
    render_original,
)
from hifirag_core.credibility.sources import classify_source
from hifirag_core.credibility.synthetic import (
    LOW_CREDIBILITY_TYPES,
    change_numbers,
    excerpt,
    make_misleading,
    paraphrase,
    reverse_claims,
    swap_drugs,
    synthetic_url,
)
from tests.credibility_helpers import medquad_path

ANSWER = ("Cystic fibrosis is inherited in an autosomal recessive pattern. It affects about 1 in 3,500 "
          "newborns; in 2019 about 30,000 people in the US had it. Treatment may include antibiotics and "
          "insulin. Mutations in the CFTR gene increase the risk of lung infections. It is not contagious.")


def test_reverse_claims_flips_polarity_and_keeps_case() -> None:
    out = reverse_claims("Mutations Increase the risk. It is not contagious and is inherited in a recessive pattern.")
    assert out.text == "Mutations Decrease the risk. It is contagious and is inherited in a dominant pattern."
    assert out.changes == ("flip:increase->decrease", "flip:is not->is", "flip:recessive->dominant")


def test_reverse_claims_swaps_once_not_back() -> None:
    assert reverse_claims("increase or decrease").text == "decrease or increase"
    assert reverse_claims("cancer screening").changes == ()  # "can" inside a word is left alone


def test_numbers_change_but_years_and_gene_names_do_not() -> None:
    out = change_numbers("BRCA1 raises risk for 1 in 3,500 people since 2019.", random.Random(0))
    assert "BRCA1" in out.text and "2019" in out.text
    assert "3,500" not in out.text
    assert {c.split("->")[0] for c in out.changes} == {"number:1", "number:3,500"}


def test_drug_swaps_are_consistent_within_a_text() -> None:
    out = swap_drugs("Insulin helps. Stop insulin before surgery; aspirin is fine.", random.Random(5))
    replacement = out.changes[0].split("->")[1]
    assert "insulin" not in out.text.lower()
    assert out.text.lower().count(replacement.lower()) >= 2 or replacement.lower() == "aspirin"
    assert len(out.changes) == 3


def test_misleading_copy_is_reproducible_and_records_every_change() -> None:
    first = make_misleading(ANSWER, random.Random(42))
    assert make_misleading(ANSWER, random.Random(42)) == first
    assert first.text != ANSWER
    kinds = {c.split(":")[0] for c in first.changes}
    assert {"flip", "number", "drug"} <= kinds
    assert "autosomal dominant" in first.text and "It is contagious" in first.text


def test_misleading_falls_back_to_negation() -> None:
    out = make_misleading("Xylitol is a sugar alcohol found in plants.", random.Random(1))
    assert out.text.startswith("It is not true that xylitol is a sugar alcohol")
    assert out.changes == ("negate:first_sentence",)


def test_paraphrase_keeps_claims() -> None:
    text = "Physicians require approximately 3 tests. Individuals with it are not contagious."
    assert paraphrase(text) == "Doctors need about 3 tests. People with it are not contagious."
    assert reverse_claims(paraphrase(text)).changes == reverse_claims(text).changes


def test_excerpt_takes_leading_sentences() -> None:
    assert excerpt(ANSWER, 1, min_chars=10) == "Cystic fibrosis is inherited in an autosomal recessive pattern."


@pytest.mark.parametrize("source_type", LOW_CREDIBILITY_TYPES)
def test_synthetic_urls_are_classified_as_their_type(source_type: str) -> None:
    rng = random.Random(9)
    for _ in range(30):
        assert classify_source(synthetic_url(source_type, "What are the symptoms of Asthma?", rng)) == source_type


# --- corpus construction on a tiny hand-made MedQuAD-shaped file ---------------------------------


def _row(doc_id: str, focus: str, answers: list[str]) -> dict[str, object]:
    return {"doc_id": doc_id, "collection": "T", "url": f"https://www.nih.gov/{doc_id}", "focus": focus,
            "source_type": "government",
            "qa": [{"qid": f"{doc_id}-{i}", "qtype": "information", "question": f"What is (are) {focus} ?",
                    "answer": a} for i, a in enumerate(answers)]}


@pytest.fixture
def tiny_medquad(tmp_path: Path) -> Path:
    long = ANSWER + " " + ANSWER
    rows = [_row("1", "Asthma", [long, "Short."]), _row("2", "asthma", [long]), _row("3", "Gout", [long]),
            _row("4", "Lupus", [long]), _row("5", "Mumps", [long]), _row("5", "Measles", [long])]
    path = tmp_path / "medquad_docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


SPEC = CorpusSpec(seed=3, n_queries=3, min_answer_chars=100, n_distractor_copies=2)


def test_repeated_medquad_ids_get_unique_keys(tiny_medquad: Path) -> None:
    keys = [r["key"] for r in iter_medquad(tiny_medquad)]
    assert keys[-2:] == ["medquad:T:5", "medquad:T:5~2"]


def test_render_original_has_headings_from_the_structure(tiny_medquad: Path) -> None:
    doc = render_original(next(iter_medquad(tiny_medquad)))
    assert doc.text.startswith("# Asthma\n\n## What is (are) Asthma?\n\n")
    assert doc.source_type == "government" and doc.kind == "original"
    assert embedding_text(doc, 20) == "Asthma\n# Asthma\n\n## What is"


def test_corpus_is_reproducible_and_seed_dependent(tiny_medquad: Path) -> None:
    first = build_corpus(tiny_medquad, SPEC)
    again = build_corpus(tiny_medquad, SPEC)
    assert again.data_fingerprint == first.data_fingerprint
    assert [d.text for d in again.docs] == [d.text for d in first.docs]
    other = build_corpus(tiny_medquad, CorpusSpec(seed=4, n_queries=3, min_answer_chars=100, n_distractor_copies=2))
    assert other.data_fingerprint != first.data_fingerprint


def test_corpus_composition_and_namespace(tiny_medquad: Path) -> None:
    corpus = build_corpus(tiny_medquad, SPEC)
    kinds = [d.kind for d in corpus.docs]
    assert kinds.count("original") == 6
    assert kinds.count("adversarial") == 3 and kinds.count("faithful") == 3 + 2
    assert corpus.namespace == CORPUS_NAMESPACE
    for doc in corpus.docs:
        if doc.kind == "original":
            assert doc.doc_id.startswith("medquad:")
        else:
            assert doc.doc_id.startswith("credx:")
            assert doc.source_type in LOW_CREDIBILITY_TYPES
            assert classify_source(doc.url) == doc.source_type


def test_adversarial_copies_change_the_claims_of_their_answer(tiny_medquad: Path) -> None:
    corpus = build_corpus(tiny_medquad, SPEC)
    for doc in corpus.docs:
        if doc.adversarial:
            assert doc.changes
            assert paraphrase(excerpt(ANSWER + " " + ANSWER, 5)) not in doc.text


def test_labels_topical_and_government_only(tiny_medquad: Path) -> None:
    corpus = build_corpus(tiny_medquad, SPEC)
    by_id = {d.doc_id: d for d in corpus.docs}
    for query in corpus.queries:
        topical = corpus.labels["topical"][query.query_id]
        government = corpus.labels["government_only"][query.query_id]
        assert topical[query.gold_doc_id] == 2.0 and government[query.gold_doc_id] == 2.0
        for doc_id in topical:
            assert by_id[doc_id].focus.lower() == query.focus.lower()
            assert not by_id[doc_id].adversarial
        assert all(by_id[d].kind == "original" for d in government)
        same_focus_copies = [d for d in corpus.docs if d.kind == "faithful" and d.focus.lower() == query.focus.lower()]
        assert all(d.doc_id in topical and d.doc_id not in government for d in same_focus_copies)
    asthma = [q for q in corpus.queries if q.focus.lower() == "asthma"]
    for query in asthma:  # "Asthma" and "asthma" are the same focus
        assert {"medquad:T:1", "medquad:T:2"} <= set(corpus.labels["government_only"][query.query_id])


def test_too_few_answerable_documents_is_a_clear_error(tiny_medquad: Path) -> None:
    with pytest.raises(ValueError, match="lower n_queries"):
        build_corpus(tiny_medquad, CorpusSpec(n_queries=50, min_answer_chars=100))


def test_copies_of_real_answers_change_claims() -> None:
    rows = list(itertools.islice(iter_medquad(medquad_path()), 150))
    made = 0
    for row in rows:
        for qa in row["qa"]:
            if len(qa["answer"]) < 200:
                continue
            faithful = make_copy(row, qa, "faithful", 1, 0, 5)
            adversarial = make_copy(row, qa, "adversarial", 1, 0, 5)
            assert adversarial.changes and not faithful.changes
            assert make_copy(row, qa, "adversarial", 1, 0, 5) == adversarial  # reproducible
            body = paraphrase(excerpt(qa["answer"], 5))
            assert body not in adversarial.text and body in faithful.text
            made += 1
    assert made > 150

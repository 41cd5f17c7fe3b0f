"""Renditions and corruptions: reproducible with a seed, corruptions change what a text asserts,
every URL shape reads as its type; the corpus at each correlation and the rates behind it."""

from __future__ import annotations

import gzip
import itertools
import json
import random
from pathlib import Path

import pytest

from hifirag_core.credibility.source_types import classify_source
from hifirag_core.evaluation.credibility_corpus import (
    CORPUS_NAMESPACE,
    DEFAULT_TYPE_SHARES,
    REALISTIC_RATES,
    CorpusSpec,
    build_corpus,
    corruption_rates,
    iter_medquad,
    make_rendition,
    plan_corpus,
    query_half,
    realize,
)
from hifirag_core.evaluation.credibility_synthetic import (
    CORPUS_TYPES,
    LOW_CREDIBILITY_TYPES,
    change_date,
    change_dose,
    corrupt,
    excerpt,
    frame,
    negate_claim,
    paraphrase,
    synthetic_url,
)
from tests.support.credibility_helpers import medquad_path

ANSWER = ("Cystic fibrosis is inherited in an autosomal recessive pattern. It affects about 1 in 3,500 "
          "newborns; in 2019 about 30,000 people in the US had it. Symptoms usually begin in early childhood, "
          "often within 2 weeks of birth. Type 1 diabetes may develop by age 20. Treatment may include 500 mg "
          "of antibiotics.")


# --- corruptions ---------------------------------------------------------------------------------


def test_dose_edit_scales_quantities_but_not_years_ages_durations_or_names() -> None:
    out = change_dose(ANSWER, random.Random(1))
    assert out.kind == "dose"
    assert {c.split("->")[0] for c in out.changes} == {"dose:1", "dose:3,500", "dose:30,000", "dose:500"}
    for kept in ("in 2019", "within 2 weeks", "age 20", "Type 1 diabetes"):
        assert kept in out.text
    assert " 500 mg" not in out.text


def test_date_edit_moves_years_ages_durations_and_life_stages() -> None:
    out = change_date(ANSWER, random.Random(2))
    kinds = sorted(c.split("->")[0] for c in out.changes)
    assert kinds == ["date:2", "date:20", "date:2019", "date:early childhood"]
    assert "2019" not in out.text and "early childhood" not in out.text
    assert "1 in 3,500" in out.text and "500 mg" in out.text  # quantities untouched


def test_negation_negates_the_first_claim_with_an_auxiliary() -> None:
    assert negate_claim("Cystic fibrosis is inherited.").text == "Cystic fibrosis is not inherited."
    assert negate_claim("It appears early. It may occur on one side.").text == "It appears early. It may not occur on one side."
    assert negate_claim("This cannot be cured.").changes == ("negation:cannot->can",)
    assert negate_claim("It is not contagious.").text == "It is contagious."
    fallback = negate_claim("Xylitol, a sugar alcohol found in plants.")
    assert fallback.text.startswith("It is not true that xylitol") and fallback.changes == ("negation:first_sentence",)


def test_corrupt_prefers_a_dose_or_date_where_the_text_states_one() -> None:
    kinds = {corrupt(ANSWER, random.Random(seed)).kind for seed in range(20)}
    assert kinds == {"dose", "date"}
    assert corrupt("Gout is a form of arthritis.", random.Random(0)).kind == "negation"
    assert corrupt(ANSWER, random.Random(7)) == corrupt(ANSWER, random.Random(7))  # reproducible


def test_paraphrase_keeps_claims() -> None:
    text = "Physicians require approximately 3 tests. Individuals with it are not contagious."
    assert paraphrase(text) == "Doctors need about 3 tests. People with it are not contagious."


def test_excerpt_takes_sentences_from_a_start() -> None:
    assert excerpt(ANSWER, 1, min_chars=10) == "Cystic fibrosis is inherited in an autosomal recessive pattern."
    assert excerpt(ANSWER, 1, start=1, min_chars=10).startswith("It affects about 1 in 3,500")


@pytest.mark.parametrize("source_type", CORPUS_TYPES)
def test_synthetic_urls_are_classified_as_their_type(source_type: str) -> None:
    rng = random.Random(9)
    for _ in range(40):
        title, _ = frame(source_type, "Asthma", "What are the symptoms of Asthma?", "body", rng)
        assert classify_source(synthetic_url(source_type, title, rng)) == source_type


@pytest.mark.parametrize("source_type", CORPUS_TYPES)
def test_every_frame_carries_the_question(source_type: str) -> None:
    title, text = frame(source_type, "Asthma", "What are the symptoms of Asthma?", "BODY", random.Random(1))
    assert "What are the symptoms of Asthma?" in f"{title}\n{text}" and text.endswith("BODY")


# --- rates ---------------------------------------------------------------------------------------


def _mean(rates: dict[str, float]) -> float:
    return sum(DEFAULT_TYPE_SHARES[t] * rates[t] for t in rates) / sum(DEFAULT_TYPE_SHARES.values())


def test_rates_run_from_none_through_realistic_to_total_at_a_fixed_overall_rate() -> None:
    def at(c: float) -> dict[str, float]:
        return corruption_rates(c, DEFAULT_TYPE_SHARES, REALISTIC_RATES)

    mean = _mean(REALISTIC_RATES)
    assert all(r == pytest.approx(mean) for r in at(0.0).values())
    assert at(0.5) == pytest.approx(REALISTIC_RATES)
    total = at(1.0)
    assert all(total[t] == 0 for t in total if t not in LOW_CREDIBILITY_TYPES)
    assert {round(total[t], 9) for t in LOW_CREDIBILITY_TYPES} == {round(total["blog"], 9)} and total["blog"] > 0
    for c in (0.0, 0.1, 0.25, 0.5, 0.6, 0.75, 1.0):
        assert _mean(at(c)) == pytest.approx(mean)
    assert at(0.25)["government"] == pytest.approx((mean + REALISTIC_RATES["government"]) / 2)


def test_rates_reject_impossible_settings() -> None:
    with pytest.raises(ValueError, match="correlation"):
        corruption_rates(1.5, DEFAULT_TYPE_SHARES, REALISTIC_RATES)
    with pytest.raises(ValueError, match="cannot sit in the low-credibility types"):
        corruption_rates(1.0, DEFAULT_TYPE_SHARES, dict.fromkeys(REALISTIC_RATES, 0.9))
    with pytest.raises(ValueError, match="same types"):
        corruption_rates(0.5, {"blog": 1.0}, REALISTIC_RATES)


def test_halves_are_a_fixed_hash_of_the_query_id() -> None:
    assert query_half("medquad:A:1#q1") == query_half("medquad:A:1#q1")
    halves = [query_half(f"medquad:A:{i}#q") for i in range(400)]
    assert 150 < halves.count("tune") < 250


# --- corpus construction on a tiny hand-made MedQuAD-shaped file ---------------------------------


def _row(doc_id: str, focus: str, answers: list[str]) -> dict[str, object]:
    return {"doc_id": doc_id, "collection": "T", "url": f"https://www.nih.gov/{doc_id}", "focus": focus,
            "source_type": "government",
            "qa": [{"qid": f"{doc_id}-{i}", "qtype": "information", "question": f"Question {i} about {focus} ?",
                    "answer": a} for i, a in enumerate(answers)]}


@pytest.fixture
def tiny_medquad(tmp_path: Path) -> Path:
    rows = [_row("1", "Asthma", [ANSWER, ANSWER[::-1]]), _row("2", "asthma", [ANSWER]), _row("3", "Gout", [ANSWER]),
            _row("4", "Lupus", [ANSWER, "Short."]), _row("5", "Mumps", [ANSWER]), _row("5", "Measles", [ANSWER])]
    path = tmp_path / "medquad_docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return path


SPEC = CorpusSpec(seed=3, n_queries=3, min_answer_chars=100, n_background=2, renditions=(4, 4))


def test_repeated_medquad_ids_get_unique_keys(tiny_medquad: Path) -> None:
    keys = [r["key"] for r in iter_medquad(tiny_medquad)]
    assert keys[-2:] == ["medquad:T:5", "medquad:T:5~2"]


def test_corpus_is_reproducible_and_seed_dependent(tiny_medquad: Path) -> None:
    first = plan_corpus(tiny_medquad, SPEC)
    again = plan_corpus(tiny_medquad, SPEC)
    assert again.fingerprint == first.fingerprint and again.renditions == first.renditions
    other = plan_corpus(tiny_medquad, CorpusSpec(seed=4, n_queries=3, min_answer_chars=100, n_background=2))
    assert other.fingerprint != first.fingerprint


def test_one_query_per_focus_and_renditions_by_role(tiny_medquad: Path) -> None:
    plan = plan_corpus(tiny_medquad, SPEC)
    assert len({q.focus.lower() for q in plan.queries}) == 3  # "Asthma" and "asthma" are one focus
    keys = [q.question_key for q in plan.queries]
    per_key = {k: sum(r.question_key == k for r in plan.renditions) for k in keys}
    assert set(per_key.values()) == {4}
    assert len(plan.renditions) == 3 * 4 + 2 * sum(q.focus == "Asthma" for q in plan.queries) + 2
    assert all(r.doc_id.startswith("credx:") and r.source_type in CORPUS_TYPES for r in plan.renditions)


def test_corrupted_texts_differ_and_the_draw_decides(tiny_medquad: Path) -> None:
    plan = plan_corpus(tiny_medquad, SPEC)
    for r in plan.renditions:
        assert r.corrupted_text != r.faithful_text and r.changes
    corpus = realize(plan, 0.5, SPEC)
    assert corpus.namespace == CORPUS_NAMESPACE
    for r, d in zip(plan.renditions, corpus.docs, strict=True):
        assert d.corrupted == (r.draw < corpus.rates[r.source_type])
        assert d.text == (r.corrupted_text if d.corrupted else r.faithful_text)
        assert corpus.correct[d.doc_id] == (not d.corrupted)


def test_too_few_foci_is_a_clear_error(tiny_medquad: Path) -> None:
    with pytest.raises(ValueError, match="lower n_queries"):
        plan_corpus(tiny_medquad, CorpusSpec(n_queries=50, min_answer_chars=100))


def test_renditions_of_real_answers_are_reproducible_and_corruptible() -> None:
    rows = list(itertools.islice(iter_medquad(medquad_path()), 150))
    made = 0
    for row in rows:
        for qa in row["qa"]:
            if len(qa["answer"]) < 200:
                continue
            rendition = make_rendition(row, qa, 0, CorpusSpec())
            assert make_rendition(row, qa, 0, CorpusSpec()) == rendition
            assert rendition.corrupted_text != rendition.faithful_text and rendition.changes
            assert classify_source(rendition.url) == rendition.source_type
            made += 1
    assert made > 150


def test_realised_corruption_is_nested_as_a_types_rate_grows(tiny_medquad: Path) -> None:
    plan = plan_corpus(tiny_medquad, SPEC)
    low = build_corpus(tiny_medquad, SPEC, 0.0)
    high = realize(plan, 1.0, SPEC)
    for a, b in zip(low.docs, high.docs, strict=True):
        if a.corrupted and high.rates[a.source_type] >= low.rates[a.source_type]:
            assert b.corrupted

"""The answerability development set: built from the shared data the same way every time."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hifirag_core.corpus.sites import FAQ_PAGE_PATTERNS
from hifirag_core.corpus.store import is_excluded
from hifirag_core.evaluation.answerability_set import build_set, faq_page_left_out, half_of, load_spec
from hifirag_core.evaluation.datasets import resolve_dataset
from hifirag_core.questions import load_questions

pytestmark = pytest.mark.shared_data


def test_the_set_is_answerable_faq_b_and_unanswerable_faq_a_and_mmu_in_two_fixed_halves():
    built = build_set()
    assert build_set() == built  # deterministic
    spec = load_spec()
    counts = Counter((r["origin"], r["answerable"]) for r in built.rows)
    assert set(counts) == {("faq-b", True), ("faq-a", False), ("mmu", False)}
    assert counts[("mmu", False)] == spec["mmu_lines"] - len(spec.get("mmu_dropped", {}))
    assert all(r["half"] == half_of(r["id"]) for r in built.rows)
    halves = Counter(r["half"] for r in built.rows)
    assert abs(halves["tune"] - halves["report"]) < 0.2 * len(built.rows)  # a hash splits about evenly
    for row in built.rows:
        if row["origin"] == "faq-b":  # its FAQ page stays, and the gold section is where the question says
            assert row["gold_url"] and not is_excluded(row["gold_url"], built.exclude)
        else:
            assert "gold_url" not in row
    faq_a = [r for r in built.rows if r["origin"] == "faq-a"]
    assert faq_a and all(r["id"] not in spec.get("faq_dropped", {}) for r in faq_a)
    # every page found to carry a left-out question's answer leaves the corpus, beside the FAQ page
    for urls in spec["answer_pages"].values():
        assert all(u in built.exclude for u in urls)
    assert not any(is_excluded(u, FAQ_PAGE_PATTERNS) and not faq_page_left_out(*_page_of(u)) for u in built.exclude)


def _page_of(url: str) -> tuple[str, str]:
    corpus = "python3.11-doc" if "docs.python.org" in url else "python-django-doc"
    page = url.split("/faq/", 1)[1]
    return corpus, "faq/" + (page if page.endswith(".html") else page.rstrip("/") + ".html")


def test_the_dataset_writes_each_half_as_a_question_file_with_its_exclusions(tmp_path):
    whole = resolve_dataset("answerability", root=tmp_path)
    report = resolve_dataset("answerability-report", root=tmp_path)
    assert whole.overrides == report.overrides and whole.overrides[0].startswith("corpus.exclude=")
    assert json.loads(whole.overrides[0].split("=", 1)[1]) == list(build_set().exclude)
    questions = load_questions(report.path)
    assert questions.format == "docs_faq" and questions.slug == "custom-answerability_report"
    assert {q.meta["half"] for q in questions.questions} == {"report"}
    assert len(load_questions(whole.path)) > len(questions) > 0

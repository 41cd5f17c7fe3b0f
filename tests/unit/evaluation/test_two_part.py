"""Two-part questions: built from the shared FAQ set the same way every time, scored on both gold sections."""

from __future__ import annotations

import hashlib
import json
from collections import Counter

import pytest

from hifirag_core.evaluation.datasets import resolve_dataset
from hifirag_core.evaluation.two_part import (
    PAIRS,
    all_cited,
    build_set,
    eligible,
    join_questions,
    pair_rows,
    paired_table,
)
from hifirag_core.evidence.answerability import Decision, by_parts
from hifirag_core.evidence.sufficiency import question_parts
from hifirag_core.questions import load_questions
from hifirag_core.resources import shared_data_dir


def _faq(qid: str, page: str, question: str, corpus: str = "python3.11-doc") -> dict:
    return {"id": f"{corpus}:{page}#{qid}", "corpus": corpus, "page": page, "anchor": qid, "question": question,
            "answer": f"answer to {question}"}


def test_two_questions_read_as_one():
    assert join_questions("How do I copy a file?", "What is a class?") == "How do I copy a file, and what is a class?"
    assert question_parts(join_questions("How do I copy a file?", "What is a class?")) == [
        "How do I copy a file", "what is a class"]


def test_only_single_questions_that_open_with_an_asking_word_are_paired():
    assert eligible(_faq("a", "faq/a.html", "How do I copy a file?"))
    assert not eligible(_faq("b", "faq/a.html", "I can’t seem to use os.read() on a pipe; why?"))  # opens with "I"
    assert not eligible(_faq("c", "faq/a.html", "Why? And how?"))  # two questions already
    assert not eligible(_faq("d", "faq/a.html", "Python is great."))


def test_pairs_join_questions_of_different_pages_and_the_halves_follow_a_fixed_hash():
    faqs = [_faq(f"q{i}", f"faq/p{i % 3}.html", f"How do I do thing {i}?") for i in range(12)]
    rows = pair_rows(faqs, n_pairs=5)
    assert rows == pair_rows(list(reversed(faqs)), n_pairs=5)  # the input's order does not matter
    assert len(rows) == 5
    for row in rows:
        first, second = (s.split("#")[0] for s in row["gold_sections"])
        assert first != second  # two pages
    used = [p for r in rows for p in r["parts"]]
    assert len(used) == len(set(used))  # a FAQ question is in one pair
    by_hash = sorted(rows, key=lambda r: hashlib.sha256(f"two-part-half:{r['id']}".encode()).hexdigest())
    assert [r["half"] for r in by_hash] == ["tune", "tune", "report", "report", "report"]


def test_one_page_cannot_pair_with_itself():
    faqs = [_faq(f"q{i}", "faq/only.html", f"How do I do thing {i}?") for i in range(6)]
    assert pair_rows(faqs) == []


@pytest.mark.shared_data
def test_the_shared_set_has_80_pairs_in_two_halves_of_40_each_with_both_gold_sections():
    built = build_set()
    assert build_set() == built  # deterministic
    assert len(built.rows) == PAIRS
    assert Counter(r["half"] for r in built.rows) == {"tune": PAIRS // 2, "report": PAIRS // 2}
    faq = {json.loads(line)["id"]: json.loads(line)
           for line in (shared_data_dir() / "docs_faq" / "faq_qa.jsonl").read_text(encoding="utf-8").splitlines()}
    for row in built.rows:
        first, second = (faq[p] for p in row["parts"])
        assert (first["corpus"], first["page"]) != (second["corpus"], second["page"])
        assert row["gold_sections"][0].endswith("#" + first["anchor"])
        assert row["gold_sections"][1].endswith("#" + second["anchor"])
        assert (row["gold_url"], row["gold_anchor"]) == tuple(row["gold_sections"][0].split("#", 1))
        assert row["question"] == join_questions(first["question"], second["question"])
    assert sum(len(question_parts(r["question"])) >= 2 for r in built.rows) == PAIRS


@pytest.mark.shared_data
def test_the_dataset_resolves_to_each_half_with_every_page_in_the_corpus(tmp_path):
    report = resolve_dataset("two-part-report", root=tmp_path)
    assert report.name == "two_part_report" and report.known_item and report.overrides == ()
    questions = load_questions(report.path)
    assert len(questions) == PAIRS // 2
    tune = {q.id for q in load_questions(resolve_dataset("two_part_tune", root=tmp_path).path).questions}
    assert tune.isdisjoint(q.id for q in questions.questions)
    assert all(len(q.meta["gold_sections"]) == 2 for q in questions.questions)


def _decision(verdict: str, score: float) -> Decision:
    return Decision(verdict, score, "evidence", "evidence")  # type: ignore[arg-type]


def test_answerability_by_parts_keeps_an_answer_the_whole_question_would_abstain_on_and_never_abstains_more():
    question = "How do I copy a file, and what is a class?"
    whole_not_found = {question: _decision("not_found", 0.3)}

    def judge(parts):
        return lambda q: {**whole_not_found, **parts}[q]

    mixed = by_parts(question, judge({"How do I copy a file": _decision("answered", 0.9),
                                      "what is a class": _decision("not_found", 0.1)}))
    assert mixed.verdict == "partial" and mixed.score == 0.9 and mixed.method == "evidence+parts"
    both = by_parts(question, judge({"How do I copy a file": _decision("answered", 0.8),
                                     "what is a class": _decision("answered", 0.7)}))
    assert both.verdict == "answered"
    neither = by_parts(question, judge({"How do I copy a file": _decision("not_found", 0.2),
                                        "what is a class": _decision("not_found", 0.1)}))
    assert neither.verdict == "not_found" and neither.method == "evidence"
    # the whole question answered: its parts are not asked (a part judged alone never makes it abstain)
    asked = []
    kept = by_parts(question, lambda q: asked.append(q) or _decision("answered" if q == question else "not_found", 0.6))
    assert kept.verdict == "answered" and asked == [question]
    # one part: the question is judged whole, once
    asked.clear()
    by_parts("How do I copy a file?", lambda q: asked.append(q) or _decision("not_found", 0.1))
    assert asked == ["How do I copy a file?"]


def test_the_paired_table_counts_each_question_once_in_mcnemars_cells():
    hit, half = [(True, True), (True, True)], [(True, True), (True, False)]
    baseline = {"a": hit, "b": half, "c": half, "d": hit}
    system = {"a": hit, "b": hit, "c": half, "d": half, "e": hit}  # "e" is not in the baseline: left out
    table = paired_table(baseline, system, ("final_abstain", "final_deep"))
    assert (table.both, table.system_only, table.baseline_only, table.neither) == (1, 1, 1, 1)
    assert table.interval.n == 4 and table.interval.mean_diff == 0.0
    assert not all_cited([]) and not all_cited(half) and all_cited(hit)
    assert "McNemar: both 1, final_deep only 1, final_abstain only 1, neither 1" in table.markdown()
    assert table.mcnemar_p == 1.0
    one_way = paired_table({q: half for q in "abcdef"}, {q: hit for q in "abcdef"})
    assert one_way.system_only == 6 and one_way.mcnemar_p == pytest.approx(2 / 64)


def test_a_gold_section_counts_when_kept_in_any_round_and_its_page_is_cited(tmp_path):
    from hifirag_core.evaluation.two_part import gold_sections_found
    from hifirag_core.records import (
        AnswerRecord,
        QuestionRecord,
        SectionDecisionRecord,
        SectionRecord,
        StageRunRecord,
    )
    from hifirag_core.store.warehouse import Warehouse

    a, b = "https://docs.example/a.html", "https://docs.example/b.html"
    w = Warehouse(tmp_path)
    meta = {"gold_sections": [f"{a}#copy", f"{b}#class"], "part_questions": ["How do I copy?", "What is a class?"]}
    w.write("questions", [QuestionRecord(query="How do I copy, and what is a class?", meta_json=json.dumps(meta),
                                         gold_url=a, gold_anchor="copy")], run_id="r", stage="input", question_id="Q")
    w.write("questions", [QuestionRecord(query="plain", gold_url=a)], run_id="r", stage="input", question_id="P")
    rounds = {0: [(a, "s1", "copy", "How do I copy?"), (b, "s2", "other", "Other")],
              1: [(b, "s3", "index-3", "What is a class?")]}
    for rnd, secs in rounds.items():  # one write per table and round: a write replaces the round's rows
        w.write("sections", [SectionRecord(url=u, section_id=i, anchor=an, heading=h, text="t") for u, i, an, h in secs],
                run_id="r", stage="sections", question_id="Q", round=rnd)
        w.write("section_decisions", [SectionDecisionRecord(url=u, section_id=i, kept=True, rank=1)
                                      for u, i, _, _ in secs], run_id="r", stage="section_rank", question_id="Q",
                round=rnd)
    w.write("answers", [AnswerRecord(text="x", cited_urls=[b])], run_id="r", stage="answer", question_id="Q")
    w.write("stage_runs", [StageRunRecord(stage="section_rank", round=rnd) for rnd in rounds], run_id="r", stage=None,
            question_id="Q")
    # the second section was kept in round 1, matched by its heading (its anchor differs); only b is cited
    assert gold_sections_found(w, "r") == {"Q": [(True, False), (True, True)]}
    # a rerun that did not look again: round 1's rows are an earlier attempt's, not this run's
    w.write("stage_runs", [StageRunRecord(stage="section_rank", round=0)], run_id="r", stage=None, question_id="Q")
    assert gold_sections_found(w, "r") == {"Q": [(True, False), (False, True)]}


@pytest.mark.parametrize(("variant", "by_part"), [("final_deep", True), ("final_abstain", False)])
def test_only_the_variant_that_looks_again_judges_a_two_part_question_part_by_part(data_root, variant, by_part):
    """Two sections, each answering one part of the question: the whole question's evidence score is read
    against one section at a time; final_deep then asks each part, final_abstain stays with the whole."""
    from hifirag_core.config import build_config, parse_overrides
    from hifirag_core.llm.examples import ExampleSet
    from hifirag_core.pipeline.derived import answerability
    from hifirag_core.pipeline.output import StageOutput
    from hifirag_core.pipeline.plan import RunContext
    from hifirag_core.pipeline.variants import variant_overrides
    from hifirag_core.pipeline.wiring import build_runtime
    from hifirag_core.questions import Question
    from hifirag_core.types import SourceDoc, SourceSection

    cfg = build_config(variant_overrides(variant), parse_overrides(["generation.examples=none"]), variant=variant)
    rt = build_runtime(RunContext(f"parts-{variant}", str(data_root), cfg, ExampleSet("", ())))
    question = Question("Q", "How do I limit the bandwidth Tidewater uses during a sync, and what does error E204 mean?",
                        None, 1)
    sync = SourceSection("s1", ("Syncing folders", "Limiting bandwidth"), "Use the --max-rate option to cap how fast "
                         "files are sent.")
    errors = SourceSection("s2", ("Troubleshooting", "E204"), "This code means a file changed while it was being copied.")
    sources = [SourceDoc(1, "https://t.example/sync", "Sync", "", (sync,)),
               SourceDoc(2, "https://t.example/errors", "Errors", "", (errors,))]
    decision = answerability(question, sources, StageOutput(stage="draft"), rt)
    # the whole question scores not_found against either section alone; its first part is found
    assert "whole question" in decision.reason if by_part else decision.reason.startswith("evidence:")
    assert (decision.verdict, decision.method) == (("partial", "evidence+parts") if by_part else ("not_found", "evidence"))

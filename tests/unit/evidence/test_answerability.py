"""Answerability: the writer's structured line, the evidence score, the verdict and the abstaining answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hifirag_core.evidence.answerability import (
    CALIBRATION,
    NO_SOURCES_TEXT,
    NOT_FOUND_TEXT,
    SIGNALS,
    Calibration,
    EvidenceSignals,
    abstention_text,
    decide,
    evidence_signals,
    parse_answerability,
    strip_answerability,
    strip_answerability_so_far,
    verdict_for,
)
from hifirag_core.text import content_terms
from hifirag_core.types import SourceDoc, SourceSection

# --- the writer's line: quirks real models show -----------------------------------------------------


@pytest.mark.parametrize("reply, verdict, reason", [
    ("Use --max-rate.\nANSWERABILITY: answered - the sync page states it", "answered", "the sync page states it"),
    ("Use --max-rate.\n\n**Answerability:** partial — only the CLI flag is covered", "partial",
     "only the CLI flag is covered"),
    ("No idea.\nanswerability: Not Found (the pages are about databases)", "not_found", "the pages are about databases"),
    ("x\nAnswerability = not-found: nothing relevant", "not_found", "nothing relevant"),
    ("x\n`ANSWERABILITY: NOT_FOUND`", "not_found", ""),
    ("x\n> Answerability: partially answered; the second half is missing.", "partial", "the second half is missing"),
    ('x\n{"answerability": "not_found", "reason": "off topic"}', "not_found", "off topic"),
    ("x\nANSWERABILITY: not_found - first thought\nANSWERABILITY: answered - on reflection", "answered",
     "on reflection"),
])
def test_the_writers_line_is_read_in_the_forms_models_write_it(reply, verdict, reason):
    field = parse_answerability(reply)
    assert field is not None and field.verdict == verdict and field.reason == reason


@pytest.mark.parametrize("reply", [
    "Use --max-rate to limit the bandwidth.",  # no line at all
    "x\nANSWERABILITY: maybe - hard to say",  # not one of the three verdicts
    "The answerability of this question is unclear.",  # the word in prose is not the field
    'x\n{"answerability": 3}',
])
def test_a_missing_or_unknown_verdict_is_no_field(reply):
    assert parse_answerability(reply) is None


def test_the_line_is_removed_from_the_text_a_user_reads():
    reply = "Use --max-rate [1]. It takes a rate such as 2M [1].\n\n**Answerability:** answered - stated\n"
    assert strip_answerability(reply) == "Use --max-rate [1]. It takes a rate such as 2M [1]."
    assert strip_answerability('Paris.\n{"answerability": "answered", "reason": "x"}') == "Paris."
    assert strip_answerability("Nothing to strip.") == "Nothing to strip."


# --- the evidence ------------------------------------------------------------------------------------


def _overlap_similarity(question: str, texts: list[str]) -> np.ndarray:
    """A stand-in for MiniLM cosine: the share of the question's words a text contains."""
    terms = set(content_terms(question))
    return np.array([len(terms & set(content_terms(t))) / max(1, len(terms)) for t in texts], dtype=np.float32)


def _source(index: int, heading: str, text: str) -> SourceDoc:
    return SourceDoc(index, f"https://docs.example/{index}.html", f"Page {index}", "",
                     (SourceSection(f"s{index}", ("Guide", heading), text, 0.9),))


SYNC = _source(1, "Limiting bandwidth", "Pass --max-rate to limit the bandwidth a sync uses. It takes a rate "
                                        "such as 2M, which means two megabytes per second.")
DATABASE = _source(2, "Vacuum", "VACUUM reclaims storage occupied by dead tuples in the database.")


def test_signals_are_high_when_a_section_is_about_the_question_and_low_otherwise():
    on_topic = evidence_signals("How do I limit the bandwidth of a sync?", [SYNC], _overlap_similarity)
    off_topic = evidence_signals("How do I peel an apple?", [DATABASE], _overlap_similarity)
    assert on_topic.coverage == 1.0 and on_topic.sentence > 0.5
    assert off_topic == EvidenceSignals(0.0, 0.0, 0.0)
    assert evidence_signals("anything", [], _overlap_similarity) == EvidenceSignals(0.0, 0.0, 0.0)


def test_the_weakest_part_of_a_two_part_question_is_what_the_part_signals_read():
    question = "How do I limit the bandwidth of a sync, and how do I vacuum a sqlite database?"
    one_part = evidence_signals(question, [SYNC], _overlap_similarity)  # the sync page covers the first part only
    both = evidence_signals(question, [SYNC, DATABASE], _overlap_similarity)
    assert one_part.part_coverage == 0.0 and one_part.part_sentence == 0.0
    assert one_part.coverage >= 0.5 and one_part.sentence > 0.0  # the whole question looks half answered
    assert both.part_coverage >= 0.5 and both.part_sentence > 0.0
    single = evidence_signals("How do I limit the bandwidth of a sync?", [SYNC], _overlap_similarity)
    assert (single.part_coverage, single.part_sentence) == (single.coverage, single.sentence)


def test_the_calibration_is_a_probability_that_grows_with_every_signal():
    low = CALIBRATION.probability(EvidenceSignals(0.2, 0.2, 0.2, 0.2, 0.2))
    high = CALIBRATION.probability(EvidenceSignals(0.8, 0.8, 1.0, 1.0, 0.8))
    assert 0.0 < low < 0.5 < high < 1.0
    for field in SIGNALS:
        assert getattr(CALIBRATION, field) >= 0.0, field
    only_parts = Calibration(intercept=-1.0, section=0.0, sentence=0.0, coverage=0.0, note="t", part_coverage=2.0)
    assert only_parts.probability(EvidenceSignals(0.0, 0.0, 1.0, 1.0, 0.0)) > 0.5 > \
        only_parts.probability(EvidenceSignals(0.0, 0.0, 1.0, 0.0, 0.0))


def test_verdicts_follow_the_thresholds():
    assert [verdict_for(s, 0.4, 0.7) for s in (0.1, 0.39, 0.4, 0.69, 0.7, 0.99)] == \
        ["not_found", "not_found", "partial", "partial", "answered", "answered"]


FIXED = Calibration(intercept=0.0, section=0.0, sentence=0.0, coverage=2.0, note="test")


def test_the_writers_verdict_wins_when_it_was_asked_and_gave_one():
    question = "How do I limit the bandwidth of a sync?"
    common = dict(calibration=FIXED, threshold=0.5, partial_below=0.8)
    evidence = decide(question, [SYNC], _overlap_similarity, writer_reply=None, ask_writer=False, **common)
    assert evidence.method == "evidence" and evidence.verdict == "answered"
    assert json.loads(evidence.signals_json())["coverage"] == 1.0
    writer = decide(question, [SYNC], _overlap_similarity, ask_writer=True,
                    writer_reply="Use --max-rate.\nANSWERABILITY: not_found - the page is about another tool", **common)
    assert (writer.verdict, writer.method) == ("not_found", "writer")
    assert writer.reason == "writer: the page is about another tool" and writer.score == evidence.score
    silent = decide(question, [SYNC], _overlap_similarity, writer_reply="Use --max-rate.", ask_writer=True, **common)
    assert (silent.verdict, silent.method) == ("answered", "writer+evidence")
    assert silent.reason.startswith("the writer gave no answerability line; evidence: ")


def test_an_abstaining_answer_lists_the_closest_sources_and_cites_nothing():
    text, see_also = abstention_text([SYNC, DATABASE, _source(3, "x", "y"), _source(4, "z", "w")])
    assert text.startswith(NOT_FOUND_TEXT) and "See also:" in text
    assert see_also == [f"https://docs.example/{n}.html" for n in (1, 2, 3)]
    assert "[1]" not in text and "- Page 1: https://docs.example/1.html" in text
    assert abstention_text([]) == (NO_SOURCES_TEXT, [])


def test_a_reply_still_arriving_never_shows_its_answerability_line_and_only_grows():
    reply = "Use the --max-rate option.\nAnother way is a limit file.\n**ANSWERABILITY:** answered - the sync page says so"
    shown = [strip_answerability_so_far(reply[:n]) for n in range(1, len(reply) + 1)]
    assert all(b.startswith(a) for a, b in zip(shown, shown[1:], strict=False))  # a held-back line never makes it shrink
    assert shown[-1] == "Use the --max-rate option.\nAnother way is a limit file."
    assert not any("answerab" in s.lower() for s in shown)
    assert strip_answerability_so_far('Done.\n{"answerability": "parti') == "Done."

"""Reading kept sentences for the answer, not only the topic (issue 41): window, answer type, contradiction."""

from __future__ import annotations

import pytest

from hifirag_core.evidence.answer_reading import answer_signals, detect, expected_type
from hifirag_core.evidence.answerability import EvidenceSignals, evidence_signals
from hifirag_core.types import SourceDoc, SourceSection


def _section(heading: str, text: str) -> SourceSection:
    return SourceSection(f"s:{heading}", ("Lighthouse", heading), text)


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Who designed the Tidewater lighthouse?", "person"),
        ("When was the lighthouse built?", "date"),
        ("In which year was the lamp replaced?", "date"),
        ("Where is the lighthouse?", "place"),
        ("How many steps does the tower have?", "number"),
        ("What percentage of ships used the light?", "number"),
        ("Why is the lighthouse painted white?", None),
        ("How do I clean the lens?", None),
        (
            "Who is at risk for glaucoma?",
            None,
        ),  # MedQuAD's risk questions ask for groups of people, not a name
    ],
)
def test_the_kind_of_answer_a_question_needs(question, kind):
    assert expected_type(question) == kind


@pytest.mark.parametrize(
    ("kind", "text", "found"),
    [
        ("number", "The tower has 212 steps.", True),
        ("number", "The tower has two hundred steps.", True),
        ("number", "The tower has many steps.", False),
        ("date", "It was built in 1874 by the harbour board.", True),
        ("date", "It was lit on 12 March after a long delay.", True),
        ("date", "It was built after a long delay.", False),
        ("place", "The lighthouse stands near Port Ellen on the coast.", True),
        ("place", "The lighthouse stands on a rock.", False),
        ("person", "The tower was designed by Robert Stevenson in a hurry.", True),
        ("person", "The tower was designed by the harbour board.", False),
    ],
)
def test_detectors(kind, text, found):
    assert detect(kind, text) is found


def test_the_focus_terms_count_only_together_in_one_window():
    question = "When was the Tidewater lighthouse lamp replaced?"
    together = [
        _section("History", "The Tidewater lighthouse was built of granite. Its lamp was replaced in 1921.")
    ]
    # every keyword is in this one section, but never two sentences apart or closer, and no date is near them
    apart = [
        _section(
            "History",
            "The Tidewater lighthouse was built of granite. It stands on a rock. The keepers lived in a cottage. "
            "A lamp can be replaced by a keeper.",
        )
    ]
    near, far = answer_signals(question, together), answer_signals(question, apart)
    assert near.window == 1.0 and near.answer_type == 1.0
    assert far.window == 0.5 and far.answer_type == 0.0


def test_a_question_of_no_particular_type_has_nothing_to_miss():
    signals = answer_signals(
        "How do I clean the lighthouse lens?",
        [_section("Care", "Clean the lighthouse lens with a soft cloth.")],
    )
    assert signals.answer_type == 1.0 and signals.window == 1.0 and signals.contradiction == 0.0


def test_a_kept_sentence_saying_the_thing_is_unknown_is_a_contradiction():
    question = "Who designed the Tidewater lighthouse?"
    said = answer_signals(
        question, [_section("History", "The designer of the Tidewater lighthouse is unknown.")]
    )
    other = answer_signals(
        question,
        [
            _section(
                "History",
                "The Tidewater lighthouse has a history. It stands on a "
                "rock. Gulls nest there. Tomorrow's weather is unknown.",
            ),
            _section("Other", "The weather is unknown."),
        ],
    )
    assert said.contradiction == 1.0
    assert other.contradiction == 0.0  # "unknown" with none of the question's keywords near it does not count


def test_evidence_signals_carry_the_answer_reading_and_a_calibration_can_weigh_it():
    sources = [
        SourceDoc(
            1,
            "https://t.example/",
            "Lighthouse",
            "",
            (_section("History", "The Tidewater lighthouse was built in 1874."),),
        )
    ]
    signals = evidence_signals(
        "When was the Tidewater lighthouse built?", sources, lambda _q, texts: [0.5] * len(texts)
    )
    assert (signals.window, signals.answer_type, signals.contradiction) == (1.0, 1.0, 0.0)
    assert "answer type 1" in signals.describe()
    none = evidence_signals("When was the Tidewater lighthouse built?", [], lambda _q, texts: [])
    assert none == EvidenceSignals(0.0, 0.0, 0.0, answer_type=0.0)

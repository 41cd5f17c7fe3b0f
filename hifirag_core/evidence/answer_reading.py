"""Does a kept sentence read like the answer, not only like the topic? Offline signals, no model.

Section similarity and keyword coverage say whether the kept pages are about the question's topic. On a
page that is on topic but lacks the answer they are high all the same. These signals read one sentence
(or a short window) at a time:

* **window**: the largest share of the question's keywords found together in one window of the kept
  text: a section's own heading and two consecutive sentences under it. The question's focus terms
  together in one place, not only somewhere in the section.
* **answer_type**: a question asking who, when, where or how many needs a person, a date, a place or a
  number in such a window that also holds at least half of the question's keywords: 1.0 when one is
  found, 0.0 when none is, and 1.0 for a question that asks for no such type (nothing to miss). Numbers
  and dates are found by regular expressions, people and places by capitalised names (and a title, or a
  preposition of place, before them); see ``detect``.
* **contradiction**: 1.0 when a window holding at least half of the keywords says the thing is unknown,
  undocumented or does not exist ("the cause is unknown", "there is no record of"), else 0.0.

``answerability.evidence_signals`` stores them beside the topic signals; a calibration gives them weights
(``answerability.Calibration``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from hifirag_core.retrieval.scoring import tokenize
from hifirag_core.text import question_keywords, split_sentences
from hifirag_core.types import SourceSection

AnswerType = Literal["person", "date", "place", "number"]
SENTENCES_PER_SECTION = 40  # sentences of each kept section read (a long section's answer is rarely later)
WINDOW = 2  # consecutive sentences read together

_TYPE_CUES: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    (
        "number",
        re.compile(
            r"\bhow (?:many|much|long|old|far|big|large|tall|high|deep|often|heavy|fast)\b|"
            r"\bwhat (?:percentage|proportion|fraction|number|share|amount)\b|\bwhat is the (?:size|"
            r"population|length|height|number|rate)\b",
            re.I,
        ),
    ),
    (
        "date",
        re.compile(
            r"\bwhen\b|\b(?:what|which) (?:year|date|day|month|decade|century)\b|\bsince when\b", re.I
        ),
    ),
    (
        "place",
        re.compile(
            r"\bwhere\b|\b(?:what|which) (?:country|city|town|state|province|region|continent|"
            r"county|island|place)\b",
            re.I,
        ),
    ),
    (
        "person",
        re.compile(
            r"\bwho(?:m|se)?\b(?! (?:is|are) (?:at risk|affected|likely))|\bwhich (?:person|people|"
            r"author|king|queen|president|scientist)\b",
            re.I,
        ),
    ),
)

_NUMBER_WORDS = (
    "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety "
    "hundred thousand million billion trillion dozen dozens half quarter percent"
).split()
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*\b|\b(?:" + "|".join(_NUMBER_WORDS) + r")s?\b|%", re.I)
_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_DATE = re.compile(
    r"\b(?:1[0-9]{3}|20[0-9]{2})s?\b|\b\d{1,2}(?:st|nd|rd|th) century\b|\b(?:"
    + "|".join(_MONTHS)
    + r")\.? \d{1,2}\b|\b\d{1,2} (?:"
    + "|".join(_MONTHS)
    + r")\b|\b(?:BC|BCE|AD|CE)\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\b(?:in|since|until|by) "
    r"(?:the )?(?:early |late |mid-)?(?:\d{1,2}(?:st|nd|rd|th) century|\d{4}s?)\b",
    re.I,
)
_NAME = r"[A-Z][a-z'’]+(?:[- ][A-Z][a-z'’]+)*"
_PERSON = re.compile(
    r"\b(?:Mr|Mrs|Ms|Dr|Prof|Sir|Lady|Lord|King|Queen|Prince|Princess|President|Pope|Saint|St)\.? "
    + _NAME
    + r"|(?<![.!?] )(?<!^)\b[A-Z][a-z]+ (?:[A-Z]\. )?(?:van |von |de |da |del )?"
    r"[A-Z][a-z]{2,}\b|\b(?:he|she|his|her) (?:was|is|wrote|founded|invented|created|"
    r"designed|discovered|led)\b|\b(?:by|author|inventor|founder|creator|designer) " + _NAME
)
_PLACE = re.compile(
    r"\b(?:in|at|from|near|to|into|across|throughout|outside|inside) (?:the )?"
    + _NAME
    + r"|\b(?:north|south|east|west|northern|southern|eastern|western|central)(?:ern)? "
    + _NAME
    + r"|\b(?:country|countries|city|cities|town|state|province|region|continent|island|river|"
    r"mountains?|coast|capital|located|situated|native to|found in|worldwide|nationwide)\b"
)
_DETECTORS: dict[AnswerType, re.Pattern[str]] = {
    "number": _NUMBER,
    "date": _DATE,
    "place": _PLACE,
    "person": _PERSON,
}
_CONTRADICTION = re.compile(
    r"\b(?:is|are|was|were|remains?|remained) (?:still )?(?:largely |currently |as yet )?(?:unknown|not known|"
    r"unclear|undocumented|undetermined|not (?:yet )?(?:known|documented|recorded|determined|established))\b|"
    r"\b(?:no|not any) (?:known|documented|recorded|reliable|surviving|published|official) (?:record|records|"
    r"account|accounts|information|data|evidence|source|sources)\b|\bthere (?:is|are|was|were) no (?:record|"
    r"records|information|evidence|data)\b|\b(?:does|do|did) not exist\b|\bnever existed\b|\bno longer exists?\b|"
    r"\bhas not been (?:documented|recorded|determined|established|reported)\b|\bnobody knows\b|\bno one knows\b",
    re.I,
)


def expected_type(question: str) -> AnswerType | None:
    """The kind of answer a who / when / where / how-many question needs (None for any other question)."""
    return next((kind for kind, cue in _TYPE_CUES if cue.search(question)), None)


def detect(kind: AnswerType, text: str) -> bool:
    """Whether ``text`` holds a ``kind`` (number, date, place or person; regular expressions, see above)."""
    return bool(_DETECTORS[kind].search(text))


@dataclass(frozen=True)
class AnswerSignals:
    window: float
    answer_type: float
    contradiction: float


def _windows(section: SourceSection) -> list[str]:
    """The section's heading with each run of ``WINDOW`` consecutive sentences (or the heading alone)."""
    heading = section.heading_path[-1] if section.heading_path else ""
    sentences = split_sentences(section.text)[:SENTENCES_PER_SECTION]
    if not sentences:
        return [heading] if heading else []
    return [
        f"{heading}\n" + " ".join(sentences[i : i + WINDOW])
        for i in range(max(1, len(sentences) - WINDOW + 1))
    ]


def answer_signals(question: str, sections: Sequence[SourceSection]) -> AnswerSignals:
    """The three signals over the kept ``sections`` (window 0, answer_type 0 for a typed question, without
    evidence)."""
    keywords = question_keywords(question)
    terms = set(tokenize([" ".join(keywords)])[0]) if keywords else set()
    kind = expected_type(question)
    windows = [w for s in sections for w in _windows(s)]
    if not terms or not windows:
        return AnswerSignals(0.0, 0.0 if kind else 1.0, 0.0)
    tokens = tokenize(windows)
    shares = [len(terms & set(t)) / len(terms) for t in tokens]
    near = [w for w, share in zip(windows, shares, strict=True) if share >= 0.5]
    typed = 1.0 if kind is None else float(any(detect(kind, w.split("\n", 1)[-1]) for w in near))
    contradicted = float(any(_CONTRADICTION.search(w) for w in near))
    return AnswerSignals(round(max(shares), 4), typed, contradicted)

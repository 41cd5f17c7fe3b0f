"""Does a kept sentence read like the answer, not only like the topic? Offline signals, no model.

Section similarity and keyword coverage say whether the kept pages are about the question's topic. On a
page that is on topic but lacks the answer they are high all the same. These signals read one sentence
(or a short window) at a time:

* **window**: the largest share of the question's keywords found together in one window of the kept
  text: a section's own heading and two consecutive sentences under it. The question's focus terms
  together in one place, not only somewhere in the section.
* **answer_type**: a question asking who, when, where, how many or how long needs a person (or an
  organisation), a date, a place, a number or a duration in such a window that also holds at least half
  of the question's keywords: 1.0 when one is found, 0.0 when none is, and 1.0 for a question that asks
  for no such type (nothing to miss). The kind a question asks for is read from its asking words
  (``expected_type``); the entities are found by spaCy's recogniser (``hifirag_core.evidence.entities``).
* **answer_window**: the two together: the largest share of the question's keywords in one window that
  also holds an entity of the kind the question asks for (for a question of no particular kind, the
  window signal). The answer's type near the question's focus terms, in one place.
* **contradiction**: 1.0 when a window holding at least half of the keywords says the thing is unknown,
  undocumented or does not exist ("the cause is unknown", "there is no record of"), else 0.0.

``answerability.evidence_signals`` stores them beside the topic signals; a calibration gives them weights
(``answerability.Calibration``); a corpus fits its own weights on probes made from its pages
(``hifirag_core.corpus.probes``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from hifirag_core.evidence import entities
from hifirag_core.evidence.entities import AnswerType
from hifirag_core.retrieval.scoring import tokenize
from hifirag_core.text import question_keywords, split_sentences
from hifirag_core.types import SourceSection

SENTENCES_PER_SECTION = 40  # sentences of each kept section read (a long section's answer is rarely later)
WINDOW = 2  # consecutive sentences read together
# The windows richest in the question's keywords whose sentences are tagged for a typed question (each
# sentence is tagged once per process): the answer to "when was X built?" sits where X and "built" are.
TYPED_WINDOWS = 16
NEAR = 0.5  # a window "near" the question holds at least this share of its keywords

_TYPE_CUES: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    ("duration", re.compile(r"\bhow (?:long|old|often)\b", re.I)),
    (
        "number",
        re.compile(
            r"\bhow (?:many|much|far|big|large|tall|high|deep|heavy|fast)\b|"
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
    """Whether ``text`` holds a ``kind`` (spaCy's recogniser, ``entities.LABELS``)."""
    return entities.holds(kind, [text])[0]


@dataclass(frozen=True)
class AnswerSignals:
    window: float
    answer_type: float
    contradiction: float
    answer_window: float = 0.0


@dataclass(frozen=True)
class _Window:
    heading: str
    sentences: tuple[str, ...]

    @property
    def body(self) -> str:
        return " ".join(self.sentences)

    @property
    def text(self) -> str:
        return f"{self.heading}\n{self.body}"


def _windows(section: SourceSection) -> list[_Window]:
    """The section's heading with each run of ``WINDOW`` consecutive sentences (or the heading alone)."""
    heading = section.heading_path[-1] if section.heading_path else ""
    sentences = split_sentences(section.text)[:SENTENCES_PER_SECTION]
    if not sentences:
        return [_Window(heading, ())] if heading else []
    return [_Window(heading, tuple(sentences[i : i + WINDOW])) for i in range(max(1, len(sentences) - WINDOW + 1))]


def _typed(kind: AnswerType, windows: list[_Window], shares: list[float]) -> tuple[float, float]:
    """(answer_type, answer_window) for a question asking for ``kind``: spaCy tags the sentences of the
    ``TYPED_WINDOWS`` windows richest in the question's keywords."""
    order = sorted((i for i, share in enumerate(shares) if share > 0), key=lambda i: (-shares[i], i))[:TYPED_WINDOWS]
    sentences = list(dict.fromkeys(sentence for i in order for sentence in windows[i].sentences))
    found = dict(zip(sentences, entities.holds(kind, sentences), strict=True))
    typed = [shares[i] for i in order if any(found[sentence] for sentence in windows[i].sentences)]
    best = max(typed, default=0.0)
    return (1.0 if best >= NEAR else 0.0), best


def answer_signals(question: str, sections: Sequence[SourceSection]) -> AnswerSignals:
    """The signals over the kept ``sections`` (window 0, answer_type 0 for a typed question, without
    evidence)."""
    keywords = question_keywords(question)
    terms = set(tokenize([" ".join(keywords)])[0]) if keywords else set()
    kind = expected_type(question)
    windows = [w for s in sections for w in _windows(s)]
    if not terms or not windows:
        return AnswerSignals(0.0, 0.0 if kind else 1.0, 0.0, 0.0)
    tokens = tokenize([w.text for w in windows])
    shares = [len(terms & set(t)) / len(terms) for t in tokens]
    window = round(max(shares), 4)
    typed, answer_window = _typed(kind, windows, shares) if kind else (1.0, window)
    contradicted = float(any(_CONTRADICTION.search(w.text) for w, share in zip(windows, shares, strict=True)
                             if share >= NEAR))
    return AnswerSignals(window, typed, contradicted, round(answer_window, 4))

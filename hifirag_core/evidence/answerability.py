"""Do the sources answer the question? One decision per question: ``answered``, ``partial`` or ``not_found``.

Offline, the decision comes from evidence the pipeline already holds, calibrated into a probability
that the kept evidence answers the question (see ``CALIBRATION`` for how it was fitted and which
signals it reads):

* **section**: the best MiniLM cosine between the question and a kept section's heading path and lead
  (what the section ranker judged);
* **sentence**: the best cosine between the question and one prose sentence of the kept sections
  (sentence-level support);
* **coverage**: the largest share of the question's content words that one kept section contains
  (retrieval: did search find a page about this at all);
* **part_coverage** and **part_sentence**: the same two for the question's weakest part
  (``sufficiency.question_parts``), so that a question in two parts is not answered by half its evidence;
* **window**, **answer_type**, **answer_window** and **contradiction**: whether one window of the kept text
  reads like the answer, not only like the topic (``hifirag_core.evidence.answer_reading``; the answer's
  type by spaCy's entity recogniser).

Which weights decide: a corpus built locally probes itself and stores its own calibration
(``hifirag_core.corpus.probes``); a run over it uses that one, and ``CALIBRATION`` (below) otherwise.
Each answer row names the calibration that decided (``Decision.calibration``).

With an LLM writer, the decision is the writer's own: the draft prompt asks it to end its reply with
a structured line (``prompts/answerability.txt``), which :func:`parse_answerability` reads tolerantly
and :func:`strip_answerability` removes from the text. A reply without a readable line falls back to
the evidence score, and the method says so.

When the answer is ``not_found`` and abstention is on (``answerability.abstain``), the answer says the
sources found do not answer the question, lists the closest sources under "See also", and cites nothing.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from hifirag_core.evidence.answer_reading import answer_signals
from hifirag_core.evidence.sufficiency import question_parts
from hifirag_core.retrieval.scoring import tokenize
from hifirag_core.text import is_block, prose_units, question_keywords
from hifirag_core.types import SourceDoc

Verdict = Literal["answered", "partial", "not_found"]
VERDICTS: tuple[Verdict, ...] = ("answered", "partial", "not_found")
# (question, texts) -> one cosine per text (MiniLM through the pipeline's cached embedder)
Similarity = Callable[[str, list[str]], np.ndarray]

# Sentences of each kept section read for the sentence signal (the draft reads as many).
SENTENCES_PER_SECTION = 15
SEE_ALSO = 3  # closest sources listed when the answer abstains
LEAD_CHARS = 200  # a section's lead, as the section ranker previews it


@dataclass(frozen=True)
class Calibration:
    """A logistic model of P(the evidence answers the question) over the signals (a weight of 0 leaves one out)."""

    intercept: float
    section: float
    sentence: float
    coverage: float
    note: str
    part_coverage: float = 0.0
    part_sentence: float = 0.0
    window: float = 0.0
    answer_type: float = 0.0
    contradiction: float = 0.0
    answer_window: float = 0.0
    # which calibration this is, as the answer row names it: "shipped" (``CALIBRATION``), or
    # "corpus:<name>@<its sha256's first 12>" for a corpus's own (``hifirag_core.corpus.probes``)
    name: str = "shipped"

    def probability(self, signals: EvidenceSignals) -> float:
        z = self.intercept + sum(getattr(self, name) * getattr(signals, name) for name in SIGNALS)
        return 1.0 / (1.0 + math.exp(-z))


SIGNALS = ("section", "sentence", "coverage", "part_coverage", "part_sentence", "window", "answer_type",
           "contradiction", "answer_window")


@dataclass(frozen=True)
class EvidenceSignals:
    section: float
    sentence: float
    coverage: float
    # the question's weakest part (``sufficiency.question_parts``): its keyword coverage and best sentence
    part_coverage: float = 0.0
    part_sentence: float = 0.0
    # one window of the kept text read for the answer (``answer_reading``); rows stored before issue 41 lack them
    window: float = 0.0
    answer_type: float = 1.0
    contradiction: float = 0.0
    answer_window: float = 0.0  # issue 41's spaCy reading; rows stored before it lack it

    def describe(self) -> str:
        return (f"section {self.section:.2f}, sentence {self.sentence:.2f}, coverage {self.coverage:.2f}, "
                f"weakest part: coverage {self.part_coverage:.2f}, sentence {self.part_sentence:.2f}; "
                f"one window: keywords {self.window:.2f}, answer type {self.answer_type:.0f}, "
                f"keywords with the answer type {self.answer_window:.2f}, contradiction {self.contradiction:.0f}")


@dataclass(frozen=True)
class Decision:
    """What the pipeline concluded about the question, stored on its answer row."""

    verdict: Verdict
    score: float  # P(answered) from the evidence (also when the writer's verdict decided)
    reason: str
    method: str  # "evidence" | "writer" | "writer+evidence" (the writer's line was missing or unreadable)
    signals: EvidenceSignals | None = None
    calibration: str = ""  # the calibration whose score this is (``Calibration.name``)

    def signals_json(self) -> str | None:
        return json.dumps(dataclasses.asdict(self.signals)) if self.signals else None


# Fitted by tools/answerability_transfer.py (L2 1.0) on the tune halves of the answerability transfer set only,
# both corpora: 353 questions (docs 64 answerable + 90 not, health 75 + 124), runs custom-transfer_docs- and
# custom-transfer_health-final_judged. The signals (section similarity and the weakest part's coverage) and the
# threshold's recall (0.90) were chosen by leaving one corpus out between the tune halves; the same recipe fitted
# on one corpus and measured on the other's report half is docs/evaluation.md's transfer table. The docs-only fit
# it replaces (intercept -5.651, section 3.700, sentence 1.133, coverage 3.255) abstained on 0.740 of the health
# report half's unanswerable questions.
CALIBRATION = Calibration(intercept=-7.105, section=6.146, sentence=0.0, coverage=0.0, part_coverage=3.841,
                          note="transfer set, docs + health tune halves, 353 questions, L2 1.0")


# --- the evidence -----------------------------------------------------------------------------------


def question_terms(question: str) -> set[str]:
    """The question's keywords (no function words, no "explain like I'm five"), stemmed as BM25 stems them."""
    keywords = question_keywords(question)
    return set(tokenize([" ".join(keywords)])[0]) if keywords else set()


def _coverage(terms: set[str], found: list[set[str]]) -> float:
    """The largest share of ``terms`` one section's words hold."""
    return max((len(terms & f) / len(terms) for f in found), default=0.0) if terms else 0.0


def evidence_signals(question: str, sources: Sequence[SourceDoc], similarity: Similarity) -> EvidenceSignals:
    """The signals over the kept sections of ``sources`` (all zero without evidence).

    The part signals read each part of the question (``sufficiency.question_parts``: "How do I X, and what
    is Y?" has two) and keep the weakest part's: an answer that covers one part well and the other not at
    all is not an answer, whatever the whole question's coverage says."""
    sections = [section for source in sources for section in source.sections]
    if not sections:
        return EvidenceSignals(0.0, 0.0, 0.0, answer_type=answer_signals(question, []).answer_type)
    leads = [f"{' > '.join(s.heading_path) or '(untitled)'}: {s.text[:LEAD_CHARS]}" for s in sections]
    sentences = list(dict.fromkeys(part for s in sections for unit in prose_units(s.text)[:SENTENCES_PER_SECTION]
                                   for part in unit if not is_block(part)))
    section_sim = float(np.max(similarity(question, leads)))
    sentence_sim = float(np.max(similarity(question, sentences))) if sentences else 0.0
    found = [set(tokenize([" ".join(s.heading_path) + "\n" + s.text])[0]) for s in sections]
    coverage = _coverage(question_terms(question), found)
    read = answer_signals(question, sections)
    parts = question_parts(question)
    if len(parts) > 1:
        part_coverage = min(_coverage(question_terms(p), found) for p in parts)
        part_sentence = min(float(np.max(similarity(p, sentences))) for p in parts) if sentences else 0.0
    else:
        part_coverage, part_sentence = coverage, sentence_sim
    return EvidenceSignals(round(section_sim, 4), round(sentence_sim, 4), round(coverage, 4),
                           round(part_coverage, 4), round(part_sentence, 4), read.window, read.answer_type,
                           read.contradiction, read.answer_window)


def verdict_for(score: float, threshold: float, partial_below: float) -> Verdict:
    """``not_found`` below ``threshold``, ``partial`` below ``partial_below``, else ``answered``."""
    if score < threshold:
        return "not_found"
    return "partial" if score < partial_below else "answered"


def decide_from_evidence(signals: EvidenceSignals, calibration: Calibration, threshold: float,
                         partial_below: float) -> Decision:
    score = calibration.probability(signals)
    verdict = verdict_for(score, threshold, partial_below)
    return Decision(verdict, round(score, 4), f"evidence: {signals.describe()}", "evidence", signals,
                    calibration.name)


# --- the writer's structured line -------------------------------------------------------------------

_VALUE = {
    "answered": "answered", "answer": "answered", "yes": "answered", "answerable": "answered",
    "fully answered": "answered", "full": "answered", "complete": "answered",
    "partial": "partial", "partially": "partial", "partly": "partial", "partially answered": "partial",
    "partly answered": "partial", "incomplete": "partial",
    "not found": "not_found", "notfound": "not_found", "not answered": "not_found", "unanswerable": "not_found",
    "no": "not_found", "none": "not_found", "no answer": "not_found", "not answerable": "not_found",
    "not in sources": "not_found", "not covered": "not_found",
}
# "ANSWERABILITY: not_found - the pages cover X only", in Markdown emphasis or code, any case, with a
# dash, colon or parenthesis before the reason.
_LINE = re.compile(
    r"^[ \t>*_`#-]*answerability[ \t*_`]*[:=][ \t*_`\"']*(?P<value>[A-Za-z][A-Za-z _-]*?)[ \t*_`\"'.]*"
    r"(?:(?:\s[-–—]|[:;,(])[ \t]*(?P<reason>.*?))?[ \t)*_`.]*$",
    re.IGNORECASE | re.MULTILINE,
)
_JSON_FIELD = re.compile(r"\{[^{}]*\"answerability\"\s*:[^{}]*\}", re.IGNORECASE)


@dataclass(frozen=True)
class WriterField:
    verdict: Verdict
    reason: str


def _verdict(raw: str) -> Verdict | None:
    key = " ".join(re.sub(r"[_-]", " ", raw.strip().lower()).split())
    return _VALUE.get(key)  # type: ignore[return-value]


def parse_answerability(reply: str) -> WriterField | None:
    """The writer's answerability line (or JSON object), the last one when it wrote several; None
    when there is none or its value is not one of the three verdicts (or a known synonym)."""
    found: WriterField | None = None
    for match in _JSON_FIELD.finditer(reply):
        try:
            obj = json.loads(match.group())
        except json.JSONDecodeError:
            continue
        value = next((v for k, v in obj.items() if k.lower() == "answerability"), None)
        verdict = _verdict(str(value)) if value is not None else None
        if verdict:
            reason = next((str(v) for k, v in obj.items() if k.lower() == "reason"), "")
            found = WriterField(verdict, reason.strip())
    for match in _LINE.finditer(reply):
        verdict = _verdict(match.group("value"))
        if verdict:
            found = WriterField(verdict, (match.group("reason") or "").strip().strip("\"'"))
    return found


def strip_answerability(text: str) -> str:
    """The reply without its answerability line(s) or JSON object."""
    cleaned = _JSON_FIELD.sub("", _LINE.sub("", text))
    return re.sub(r"\n{3,}", "\n\n", cleaned).strip()


_MARKUP = re.compile(r"^[ \t>*_`#{\"'-]+")


def strip_answerability_so_far(text: str) -> str:
    """A reply still arriving, as a reader may see it: without its answerability line(s), and without a last
    line that is, or may become, one ("**", "**Answerab", '{"answerability": "part'). What is shown only grows:
    a last line held back is shown once it can no longer be the answerability line."""
    head, _, last = text.rpartition("\n")
    key = _MARKUP.sub("", last).lower()
    if last.strip() and (key.startswith("answerability") or "answerability".startswith(key.rstrip())):
        text = head
    return strip_answerability(text)


def decide(question: str, sources: Sequence[SourceDoc], similarity: Similarity, *, writer_reply: str | None,
           ask_writer: bool, calibration: Calibration, threshold: float, partial_below: float) -> Decision:
    """The writer's own verdict when it was asked for one and gave it, else the evidence's."""
    evidence = decide_from_evidence(evidence_signals(question, sources, similarity), calibration, threshold,
                                    partial_below)
    if not ask_writer:
        return evidence
    field = parse_answerability(writer_reply or "")
    if field is None:
        why = "the writer gave no answerability line" if writer_reply else "the writer gave no reply"
        return Decision(evidence.verdict, evidence.score, f"{why}; {evidence.reason}", "writer+evidence",
                        evidence.signals, evidence.calibration)
    reason = field.reason or "(no reason given)"
    return Decision(field.verdict, evidence.score, f"writer: {reason}", "writer", evidence.signals,
                    evidence.calibration)


# --- what the user reads when the sources do not answer ---------------------------------------------

NOT_FOUND_TEXT = "The sources I found do not answer this question."
NO_SOURCES_TEXT = "I found no sources that answer this question."


def abstention_text(sources: Sequence[SourceDoc], limit: int = SEE_ALSO) -> tuple[str, list[str]]:
    """The answer that abstains, and the URLs it lists under "See also" (the closest sources, in the
    filters' order); it cites nothing."""
    closest = list(sources)[:limit]
    if not closest:
        return NO_SOURCES_TEXT, []
    lines = [NOT_FOUND_TEXT, "", "See also:"]
    lines += [f"- {s.title.strip() or s.url}: {s.url}" for s in closest]
    return "\n".join(lines), [s.url for s in closest]


def by_parts(question: str, decide: Callable[[str], Decision]) -> Decision:
    """The answerability of a question of several parts: the whole question's decision (``decide``), or
    when that is ``not_found``, each part's own: ``answered`` when every part is, ``not_found`` when none
    is answered or partial, else ``partial`` (the score the best part's). Judging by parts only ever
    keeps an answer the whole question's judgment would abstain on: a part that leans on the rest of the
    question ("Writing C is hard; are there any alternatives?") judged alone must not make one abstain."""
    whole = decide(question)
    parts = question_parts(question)
    if len(parts) < 2 or whole.verdict != "not_found":
        return whole
    decisions = [decide(part) for part in parts]
    verdicts = [d.verdict for d in decisions]
    if all(v == "answered" for v in verdicts):
        verdict = "answered"
    elif all(v == "not_found" for v in verdicts):
        return whole
    else:
        verdict = "partial"
    best = max(decisions, key=lambda d: d.score)
    reason = "by part: " + "; ".join(f"{p!r} {d.verdict} ({d.score:.2f})" for p, d in zip(parts, decisions,
                                                                                         strict=True))
    return Decision(verdict, best.score, f"{reason}; whole question: {whole.reason}", f"{best.method}+parts",
                    best.signals, best.calibration)

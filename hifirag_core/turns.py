"""Follow-up turns (beyond the paper): a question that names the answer it follows, and what it reads of it.

An answer is named by its answer id, ``<run_id>/<question_id>``: the run that wrote it and its question there
(run ids never hold a slash, so the first one splits them; a question id may hold more). The service returns it
with every answer (the ``X-HiFiRAG-Answer-Id`` header, MCP ``ask``'s ``answer_id``), and a question names it as
``follows`` (``/run``, ``/evaluate``, the Ask page's Follow up box, MCP ``ask``, a question file's line).

A follow-up turn reads of the turn it follows (:class:`EarlierTurn`, read from the warehouse by
``hifirag_core.pipeline.threads``): the thread's questions as the pipeline read them and the last answer, which
the query plan turns into a question that stands alone, and the pages and sections that turn kept, which join
the new searches' evidence and are ranked again. Offline, the question is the follow-up with the earlier
question's keywords merged in (:func:`merged_question`); with a model, the cheap model rewrites it
(``prompts/restate.txt``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hifirag_core.records import PageRecord, SectionRecord, TurnRecord
from hifirag_core.text import question_keywords

# An answer id: the run (letters, digits, '.', '_', '-'; ``check_run_id``), a slash, the question id.
ANSWER_ID = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]{0,127})/(.+)$", re.DOTALL)
MAX_ANSWER_ID_CHARS = 400
# Keywords of the earlier turns merged into an offline follow-up, at most (the latest turn's first).
MERGED_KEYWORDS = 8
# What of the last answer the cheap model reads to resolve "that option" (characters).
ANSWER_CHARS = 1500
# Where a carried page came from: ``pages.reused_from`` is this and the answer id of the turn it was kept in.
CARRIED_FROM = "turn:"


class ThreadError(ValueError):
    """A ``follows`` that names no answer the question may follow; the message says which and why."""


@dataclass(frozen=True)
class AnswerRef:
    """One answer: the run that wrote it and its question there."""

    run_id: str
    question_id: str

    @property
    def id(self) -> str:
        return f"{self.run_id}/{self.question_id}"


def parse_answer_id(value: object) -> AnswerRef:
    """The answer an answer id names (``ThreadError`` saying what to send when it is not one)."""
    if not isinstance(value, str) or not value.strip():
        raise ThreadError("follows: send the answer id of the answer this question follows, "
                          "<run_id>/<question_id> (the X-HiFiRAG-Answer-Id of its response)")
    value = value.strip()
    if len(value) > MAX_ANSWER_ID_CHARS:
        raise ThreadError(f"follows: {len(value):,} characters; an answer id has at most {MAX_ANSWER_ID_CHARS}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ThreadError("follows: must not contain control characters")
    match = ANSWER_ID.match(value)
    if match is None:
        raise ThreadError(f"follows: {value!r} is not an answer id; send <run_id>/<question_id>, "
                          "for example service-offline-final_deep_judged-1a2b3c4d-20261205/run-20261205T101500-ab12cd34")
    return AnswerRef(match.group(1), match.group(2))


@dataclass(frozen=True)
class ThreadContext:
    """What the query plan of a follow-up reads of the turns before it."""

    questions: tuple[str, ...]  # each earlier turn's question as the pipeline read it, the first turn's first
    answer: str  # the last turn's answer, its first ANSWER_CHARS characters


@dataclass(frozen=True)
class EarlierTurn:
    """The answer a follow-up follows, as the warehouse holds it."""

    answer: AnswerRef
    turn: int  # its own turn number: 1 when it follows nothing
    thread: AnswerRef  # the thread's first turn
    questions: tuple[str, ...]  # the thread's questions as read, the first turn's first and this one's last
    text: str  # its answer
    pages: tuple[PageRecord, ...]  # the pages it kept a section of, marked as carried from it
    sections: tuple[SectionRecord, ...]  # the sections it kept, each once

    @property
    def context(self) -> ThreadContext:
        return ThreadContext(self.questions, self.text[:ANSWER_CHARS])

    def turn_row(self) -> TurnRecord:
        """The ``turns`` row of the question that follows this answer."""
        return TurnRecord(turn=self.turn + 1, thread_run_id=self.thread.run_id,
                          thread_question_id=self.thread.question_id, follows_run_id=self.answer.run_id,
                          follows_question_id=self.answer.question_id, earlier_pages=len(self.pages),
                          earlier_sections=len(self.sections))


def merged_question(question: str, context: ThreadContext) -> str:
    """The offline follow-up: the question as asked, then the earlier questions' keywords it does not hold
    (the latest turn's first), in brackets: "and on Windows? (Tidewater requirements run)"."""
    own = {t.lower() for t in question_keywords(question)}
    merged: list[str] = []
    for earlier in reversed(context.questions):
        for term in question_keywords(_asked_part(earlier)):
            if term.lower() not in own and term.lower() not in {m.lower() for m in merged}:
                merged.append(term)
    merged = merged[:MERGED_KEYWORDS]
    return f"{question.strip()} ({' '.join(merged)})" if merged else question.strip()


def _asked_part(question: str) -> str:
    """An earlier offline follow-up's own words and its merged keywords alike (the brackets are dropped)."""
    return question.replace("(", " ").replace(")", " ")


def carried_from(page: PageRecord) -> str | None:
    """The answer id of the turn a page was carried from, or None for a page this question read itself."""
    source = page.reused_from or ""
    return source[len(CARRIED_FROM):] if source.startswith(CARRIED_FROM) else None

"""Generation (prompt A.4): pass 1, the draft from the numbered sources; pass 2, the few-shot refinement of style
and length in the same conversation."""


from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from hifirag_core.cpu import in_context
from hifirag_core.evidence.answerability import (
    evidence_signals,
    strip_answerability,
)
from hifirag_core.pipeline.derived import writer_asked
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.relevance import similarity
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    DraftRecord,
)
from hifirag_core.text import word_count
from hifirag_core.types import (
    AnswerStyle,
    ChatTurn,
    Conversation,
    SourceDoc,
)


def answer_style(question: Question, rt: Runtime, *, dates: bool) -> AnswerStyle:
    """How the writer is asked to write: the steering's language, length and (pass 1) the sources' dates.
    An English question answered in English keeps the paper's prompt."""
    steer = Steer(question, rt.cfg)
    language = steer.language if steer.non_english else None
    return AnswerStyle(language=language, length=steer.length,  # type: ignore[arg-type]
                       source_dates=steer.source_dates if dates else False)


def _with_style(call, style: AnswerStyle):
    """A writer call with ``style`` only when it departs from the paper's (writers that predate steering)."""
    return call(style=style) if style != AnswerStyle() else call()


def _writer_text(text: str | None, rt: Runtime) -> str | None:
    """A writer pass's text without the answerability line it was asked to add."""
    return strip_answerability(text) if text and writer_asked(rt) else text


def write_draft(question: Question, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    style = answer_style(question, rt, dates=True)
    with _while_writing(question, sources, rt):
        decision = _with_style(lambda **kw: rt.writer_model.draft(question.query, sources,
                                                                  max_words=rt.cfg.generation.draft_words, **kw),
                               style)
    text = _writer_text(decision.value.last_reply, rt) if decision.status == OK else None
    record = DraftRecord(text=text, n_words=word_count(text) if text else None,
                         source_urls=[s.url for s in sources], method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("draft"),
                         conversation_json=conversation_to_json(decision.value),
                         status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=decision.value,
                       status=decision.status, error=decision.error)


@contextlib.contextmanager
def _while_writing(question: Question, sources: list[SourceDoc], rt: Runtime) -> Iterator[None]:
    """With ``limits.overlap``, embed what the answerability check will read (the kept sections' leads and
    sentences) on another thread while the writer writes, joined when it is done: the check, after the
    writer's passes, then finds every vector in the embedder's cache. It computes the same encodings in
    the same batches either way, so its verdict is the same."""
    if not rt.cfg.limits.overlap or not sources:
        yield
        return
    # a failure here is left in its future: the check computes the vectors itself and meets it there
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hifirag-overlap") as pool:
        pool.submit(in_context(evidence_signals), question.query, sources, similarity(rt))
        yield


def conversation_to_json(conversation: Conversation) -> str:
    return json.dumps([{"role": t.role, "text": t.text} for t in conversation.turns], ensure_ascii=False)


def conversation_from_json(text: str | None) -> Conversation | None:
    if not text:
        return None
    return Conversation(tuple(ChatTurn(t["role"], t["text"]) for t in json.loads(text)))


def refine_answer(question: Question, draft: StageOutput, rt: Runtime) -> StageOutput:
    if not rt.cfg.generation.two_pass:
        return StageOutput(records=[DraftRecord(status="skipped")], status="skipped")
    conversation = draft.value
    if draft.status != OK or not isinstance(conversation, Conversation) or not conversation.last_reply:
        record = DraftRecord(status="skipped", error="no draft to refine")
        return StageOutput(records=[record], status="skipped")
    style = answer_style(question, rt, dates=False)
    decision = _with_style(lambda **kw: rt.writer_model.refine(question.query, conversation, list(rt.examples.examples),
                                                               **kw), style)
    text = _writer_text(decision.value, rt) if decision.status == OK else None
    draft_record = draft.records[0]
    assert isinstance(draft_record, DraftRecord)
    record = DraftRecord(text=text, n_words=word_count(text) if text else None,
                         source_urls=draft_record.source_urls, method=decision.method,
                         model=getattr(rt.writer_model, "model", None),
                         prompt_hash=getattr(rt.writer_model, "prompt_hashes", {}).get("refine"),
                         status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=text,
                       status=decision.status, error=decision.error)

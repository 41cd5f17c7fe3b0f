"""The answer: the refined text (or the draft) with its citations and the answerability decision, or an
abstention that says the sources do not answer."""


from __future__ import annotations

from hifirag_core.evidence.answerability import Decision as Answerability
from hifirag_core.evidence.answerability import (
    abstention_text,
)
from hifirag_core.evidence.attribution import (
    render_citations,
)
from hifirag_core.pipeline.derived import abstains, final_text
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    AnswerRecord,
    AnswerSentenceRecord,
)
from hifirag_core.text import word_count
from hifirag_core.types import (
    SourceDoc,
)

_SHOWN = {
    "answered": "the sources found answer this question",
    "partial": "the sources found may answer this question only in part",
    "not_found": "the sources found may not answer this question; check them before relying on this answer",
}


def decision_note(decision: Answerability, rt: Runtime) -> str | None:
    """The decision as a reader is shown it beside an answer that does not abstain (``answerability.show``)."""
    if not rt.cfg.answerability.show or abstains(decision, rt):
        return None
    return f"Answerability: {decision.verdict} ({decision.score:.2f}): {_SHOWN[decision.verdict]} ({decision.reason})."


def language_note(steer: Steer, rt: Runtime) -> str | None:
    """What a reader of an offline answer to a question not in English (or asked for in another language) is told."""
    if not steer.non_english or rt.cfg.backends.writer_llm != "offline":
        return None
    asked = "this question is in " + steer.detected.name if steer.detected.code != "en" else \
        f"{steer.language_name} was asked for"
    return (f"The offline default answers in English only ({asked}): its models and the local corpus are "
            "English. Use a model writer (for example --profile gemini) for answers in other languages.")


def assemble_answer(question: Question, draft: StageOutput, refined: StageOutput, citations: StageOutput,
                    decision: Answerability, sources: list[SourceDoc], rt: Runtime) -> StageOutput:
    """The answer: the refined text (or the draft) with each sentence's citations, and whether the sources
    answer the question; with ``answerability.abstain`` a ``not_found`` answer says so instead, lists the
    closest sources under "See also" and cites nothing; with ``answerability.show`` the answer is given and
    its note says what was decided."""
    text, from_stage = final_text(draft, refined)
    steer = Steer(question, rt.cfg)
    verdict = {"answerability": decision.verdict, "answerability_score": decision.score,
               "answerability_reason": decision.reason, "answerability_method": decision.method,
               "answerability_signals": decision.signals_json(),
               "answerability_calibration": decision.calibration or None, "language": steer.language,
               "note": "\n".join(n for n in (decision_note(decision, rt), language_note(steer, rt)) if n) or None}
    sentences = sorted((r for r in citations.records if isinstance(r, AnswerSentenceRecord)),
                       key=lambda r: r.sentence_index)
    if abstains(decision, rt):
        said, see_also = abstention_text(sources)
        record = AnswerRecord(text=said, n_words=word_count(said), from_stage="abstain", abstained=True,
                              see_also_urls=see_also, **verdict)
    elif text:
        cited_text, cited = render_citations(text, [(r.sentence, r.urls) for r in sentences])
        record = AnswerRecord(text=text, n_words=word_count(text), cited_urls=cited, cited_text=cited_text,
                              from_stage=from_stage, **verdict)
    else:
        why = next((o.error for o in (refined, draft) if o.error), None) or "no answer text was produced"
        record = AnswerRecord(status="no_answer", error=why, **verdict)
    return StageOutput(records=[record], status=record.status, error=record.error)

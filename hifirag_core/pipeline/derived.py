"""What a question's trail derives once from finished stages, for the stages after the writer.

The writer's text (as written, with its ``[n]`` markers, and as read), and whether the sources answer the
question (decided once per question from the sources and the draft; the citation check and the answer
both follow it). The trail (``hifirag_core.pipeline.trail``) computes these and hands them to the stages
as parameters, so a stage's inputs are all in its signature.
"""


from __future__ import annotations

from hifirag_core.evidence.answerability import (
    CALIBRATION,
    by_parts,
)
from hifirag_core.evidence.answerability import Decision as Answerability
from hifirag_core.evidence.answerability import decide as decide_answerability
from hifirag_core.evidence.attribution import (
    strip_markers,
)
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.relevance import similarity
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    DraftRecord,
)
from hifirag_core.types import (
    Conversation,
    SourceDoc,
)


def writer_asked(rt: Runtime) -> bool:
    """Whether the writer was asked to say if the sources answer the question (an LLM writer with abstention on)."""
    return bool(getattr(rt.writer_model, "asks_answerability", False))


def writer_text(draft: StageOutput, refined: StageOutput) -> tuple[str | None, str | None]:
    """The writer's text as it wrote it (with any ``[n]`` markers) and the pass it came from: the
    refine pass if it produced one."""
    for out in (refined, draft):
        rec = out.records[0] if out.records else None
        if isinstance(rec, DraftRecord) and rec.ok and rec.text:
            return rec.text, out.stage
    return None, None


def final_text(draft: StageOutput, refined: StageOutput) -> tuple[str | None, str | None]:
    """The answer's text as the user reads it (markers removed) and the pass it came from."""
    text, stage = writer_text(draft, refined)
    return (strip_markers(text).strip(), stage) if text else (None, None)


def answerability(question: Question, sources: list[SourceDoc], draft: StageOutput, rt: Runtime) -> Answerability:
    """Whether the sources answer the question: the writer's own verdict when it was asked for one
    (an LLM writer with abstention on), else the calibrated evidence score (``hifirag_core.evidence.answerability``),
    part by part of the question in a variant that looks again (``hifirag_core.evidence.answerability.by_parts``)."""
    cfg = rt.cfg.answerability
    conversation = draft.value if isinstance(draft.value, Conversation) else None
    asked = writer_asked(rt)

    own = rt.calibration  # the corpus's own (issue 41), else the shipped one with the config's threshold
    calibration, threshold, partial_below = ((own.calibration, own.threshold, own.partial_below) if own else
                                             (CALIBRATION, cfg.threshold, cfg.partial_below))

    def decide(query: str) -> Answerability:
        return decide_answerability(
            query, sources, similarity(rt),
            writer_reply=conversation.last_reply if conversation else None, ask_writer=asked,
            calibration=calibration, threshold=threshold, partial_below=partial_below)

    # a variant that looks again judges the evidence part by part (the writer, when asked, judges the whole)
    return by_parts(question.query, decide) if rt.cfg.research.enabled and not asked else decide(question.query)


def abstains(decision: Answerability, rt: Runtime) -> bool:
    """Whether the answer says the sources do not answer instead of answering (and so cites nothing)."""
    return rt.cfg.answerability.abstain and decision.verdict == "not_found"

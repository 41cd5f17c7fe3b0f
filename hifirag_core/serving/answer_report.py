"""What a served question shows: a Markdown step per finished stage, and the report from its answers row.

``render_report`` is the one place an answer becomes what a client reads, for ``/run`` and
``/evaluate`` alike, from the answers row the citation stage's per-sentence records built: the
report is the text with ``[k]`` after each cited sentence and the numbered sources under it, and
its ``citations`` are the same URLs in the same order (the organisers' front end numbers
``citations`` from 1, so ``[k]`` in the report is ``citations[k - 1]``). ``/evaluate`` answers with
the plain text, as ``export-mmu`` does, because the static evaluation scores it against references
without citations. Whatever else the answer stage writes into the row is shown as written: an
answer that abstains (the sources found do not answer) names the closest sources under "See also"
in its own text and cites nothing; the answer's note (whether its sources answer, with
``answerability.show``; the offline writer's English) closes ``/run``'s report in italics. A question
without an answer has no report.
The steps shown as each stage finishes are the stages' own (``hifirag_core.pipeline.steps``); ``stage_step``
finds a stage's renderer through its spec.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from hifirag_core.evidence.answerability import strip_answerability_so_far
from hifirag_core.pipeline.derived import final_text
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.specs import ANSWER_STAGE, spec, writer_outputs
from hifirag_core.pipeline.steps import safe_url
from hifirag_core.records import AnswerRecord

# A report answers, abstains (the sources do not answer), is the last draft (the deadline came
# first), or does not exist.
ANSWERED, ABSTAINED, DRAFT, NO_REPORT = "answered", "abstained", "draft", "none"
# Under a draft served at the deadline: its sources were read but never checked against its sentences.
UNCHECKED_DRAFT = "_A draft: the time ran out before its sources were checked, so it cites none._"
_LIST_NUMBER = re.compile(r"\s*\d+[.)]")  # "1." opening a list item ends no sentence


@dataclass(frozen=True)
class Report:
    """The answer as a client gets it."""

    markdown: str | None  # /run's final_report
    citations: list[str] = field(default_factory=list)
    kind: str = NO_REPORT
    text: str | None = None  # the answer without markers or sources (/evaluate's generated_response)


def render_report(answer: AnswerRecord | None) -> Report:
    """The report of a question from its answers row (whatever the answer stage wrote)."""
    if answer is None or not answer.ok or not (answer.text or "").strip():
        return Report(None)
    text = answer.text.strip()
    if answer.abstained:  # its text lists the closest sources; it cites none
        return Report(text, [], ABSTAINED, text)
    urls = list(answer.cited_urls)
    note = "".join(f"\n\n_{line.strip()}_" for line in (answer.note or "").splitlines() if line.strip())
    if not urls or not (answer.cited_text or "").strip():
        return Report(text + note, [], ANSWERED, text)
    sources = "\n".join(f"{k}. <{safe_url(url)}>" for k, url in enumerate(urls, 1))
    return Report(f"{answer.cited_text.strip()}\n\n**Sources**\n\n{sources}{note}", urls, ANSWERED, text)


def partial_report(outputs: Mapping[str, StageOutput]) -> Report:
    """The best report the stages finished so far allow, for a question whose time ran out.

    The answer row when the answer stage finished; else the latest generation pass. That pass's
    sources were not checked by the citation stage, so it is shown as a draft without ``[k]`` markers
    and cites nothing: a client must never read an unchecked source as a citation. Else none.
    """
    answer = outputs.get(ANSWER_STAGE)
    if answer is not None:
        return render_report(next((r for r in answer.records if isinstance(r, AnswerRecord)), None))
    passes = writer_outputs(outputs)
    if not passes:
        return Report(None)
    draft, refined = passes[0], (passes[1] if len(passes) > 1 else StageOutput())
    text, _ = final_text(draft, refined)
    if not text:
        return Report(None)
    return Report(f"{text}\n\n{UNCHECKED_DRAFT}", [], DRAFT, text)


def answer_pieces(text: str, limit: int = 24) -> list[str]:
    """Growing prefixes of ``text`` ending at sentence or paragraph ends, for streaming the answer.

    Each piece is ``text[:k]``, so a client that shows the latest message never sees the text change
    its beginning; the last piece is the whole text. At most ``limit`` pieces (sentences are grouped).
    """
    ends = [m.end() for m in re.finditer(r"[.!?:][\"'”’)\]]*(?=\s)|\n\n", text)
            if not _LIST_NUMBER.fullmatch(text[text.rfind("\n", 0, m.end()) + 1 : m.end()])]
    ends = sorted({e for e in ends if 0 < e < len(text)} | {len(text)})
    if len(ends) > limit:
        step = len(ends) / limit
        ends = sorted({ends[min(len(ends) - 1, int((i + 1) * step) - 1)] for i in range(limit)} | {len(text)})
    return list(dict.fromkeys(text[:e].rstrip() for e in ends))


# the writer's passes while they are written (hifirag_core.llm.streaming), as /run shows them
_WRITING = {"draft": "Draft", "refine": "Refining"}


def writing_step(stage: str, text: str) -> str:
    """The step of a pass still being written: its name, how far it is, and the text so far."""
    name = _WRITING.get(stage, stage.capitalize())
    text = strip_answerability_so_far(text)  # the writer's verdict line is for the pipeline, not the reader
    words = len(text.split())
    return f"**{name}** (writing): {words} word{'s' if words != 1 else ''} so far.\n\n{text.strip()}"


def stage_step(output: StageOutput, outputs: Mapping[str, StageOutput]) -> str | None:
    """The Markdown a client is shown when ``output``'s stage finishes (None: nothing worth showing).

    ``outputs`` holds the question's stage outputs so far (names, titles and anchors come from them).
    """
    render = spec(output.stage).step
    return render(output, outputs) if render is not None else None

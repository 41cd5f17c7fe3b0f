"""One question's stage outputs so far, and the values later stages derive from them.

The question runner (``hifirag_core.pipeline.runner``) records each stage's output here; a spec's ``gather``
reads the trail for the stage's parameters. What the trail derives once per question (the writer's
numbered sources, the answerability decision, the writer's text to cite) comes from ``pipeline.context``
and ``pipeline.derived``, below the stages, and reaches a stage as a parameter of its own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from hifirag_core.evidence.answerability import Decision as Answerability
from hifirag_core.pipeline.context import build_sources, writer_context
from hifirag_core.pipeline.derived import abstains, answerability, writer_text
from hifirag_core.pipeline.output import StageOutput
from hifirag_core.questions import Question
from hifirag_core.records import PageRecord
from hifirag_core.turns import merged_question
from hifirag_core.types import SourceDoc, Sufficiency

if TYPE_CHECKING:
    from hifirag_core.pipeline.runtime import Runtime


class Trail:
    """One question's stage outputs so far, and what later stages derive from them.

    ``outputs`` holds the first pass, by stage; ``rounds`` each follow-up round's outputs (round 1 first)
    of a variant that looks again. The writer reads the evidence of every round (``merged``).

    ``asked`` is the question as asked; ``question`` the one the stages answer: the same, except in a follow-up
    turn, where the query plan restates it to stand alone and every later stage reads that (``gather_for``).
    """

    def __init__(self, question: Question, rt: Runtime | None = None):
        self.asked = question
        self.question = question
        self.rt = rt  # None only where no stage will run (a question that failed as a whole)
        self.outputs: dict[str, StageOutput] = {}
        self.rounds: list[dict[str, StageOutput]] = []
        self._sources: list[SourceDoc] | None = None
        self._answerability: Answerability | None = None

    def __getitem__(self, stage: str) -> StageOutput:
        return self.outputs[stage]

    def get(self, stage: str) -> StageOutput | None:
        return self.outputs.get(stage)

    def record(self, output: StageOutput) -> None:
        """Keep a stage's output under its stage and round (a follow-up turn's query plan says how the later
        stages read the question)."""
        if output.round == 0:
            self.outputs[output.stage] = output
            if output.stage == "query_plan" and self.asked.earlier is not None:
                self.question = restated_question(self.asked, output)
            return
        while len(self.rounds) < output.round:
            self.rounds.append({})
        self.rounds[output.round - 1][output.stage] = output

    def at(self, stage: str, round: int) -> StageOutput | None:
        """A stage's output in one round (0: the first pass)."""
        if round == 0:
            return self.outputs.get(stage)
        return self.rounds[round - 1].get(stage) if round <= len(self.rounds) else None

    def latest(self, stage: str) -> StageOutput | None:
        """The stage's output in the last round that ran it."""
        for outputs in reversed(self.rounds):
            if stage in outputs:
                return outputs[stage]
        return self.outputs.get(stage)

    def merged(self, stage: str) -> StageOutput:
        """The stage's rows over every round (the first pass's output itself when no round added any)."""
        first = self.outputs[stage]
        later = [outputs[stage] for outputs in self.rounds if stage in outputs]
        if not later:
            return first
        return StageOutput(stage=stage, records=[r for out in (first, *later) for r in out.records],
                           status=first.status, error=first.error)

    def earlier_queries(self) -> tuple[str, ...]:
        """Every query searched so far, the first pass's plan first."""
        plans = [self.outputs.get("query_plan"), *(outputs.get("followup") for outputs in self.rounds)]
        return tuple(dict.fromkeys(q for plan in plans if plan is not None for q in (plan.value or [])))

    def read_urls(self) -> tuple[str, ...]:
        """Every URL the question has read (fetched) so far, in any round. A follow-up round never reads one
        again; a URL the filter judged and dropped before may be kept now, for the part it was searched for."""
        pages = [self.outputs.get("fetch"), *(outputs.get("fetch") for outputs in self.rounds)]
        return tuple(dict.fromkeys(r.url for out in pages if out is not None for r in out.records
                                   if isinstance(r, PageRecord) and r.url))

    def next_page_order(self) -> int:
        """The number the next page read gets: after every page read so far."""
        orders = [r.order for r in self.merged("fetch").records if isinstance(r, PageRecord)]
        return max(orders, default=0) + 1

    def falls_short(self) -> bool:
        """Whether the last sufficiency check found parts of the question missing."""
        check = self.latest("sufficiency")
        return check is not None and isinstance(check.value, Sufficiency) and check.value.falls_short

    def sources(self) -> list[SourceDoc]:
        """The numbered sources the writer and the citation check read (built once per question, over every
        round's evidence), within the writer's context bound (``hifirag_core.pipeline.context``)."""
        if self._sources is None:
            assert self.rt is not None, "a trail without a runtime cannot gather a stage's inputs"
            self._sources = build_sources(self.question, self.merged("fetch"), self.merged("sections"),
                                                 self.merged("section_rank"), self.rt.cfg.generation,
                                                 limit=writer_context(self.rt))
        return self._sources

    def answerability(self) -> Answerability:
        """Whether the sources answer the question (decided once per question, from the sources and the draft):
        the citation check and the answer both follow it."""
        if self._answerability is None:
            assert self.rt is not None, "a trail without a runtime cannot gather a stage's inputs"
            self._answerability = answerability(self.question, self.sources(), self["draft"], self.rt)
        return self._answerability

    def answer_to_cite(self) -> str | None:
        """The writer's text for the citation check, markers and all; none when the answer abstains."""
        assert self.rt is not None, "a trail without a runtime cannot gather a stage's inputs"
        if abstains(self.answerability(), self.rt):
            return None
        return writer_text(self["draft"], self["refine"])[0]


def restated_question(asked: Question, plan: StageOutput) -> Question:
    """The question the stages after a follow-up turn's query plan answer: restated to stand alone."""
    if asked.earlier is None:
        return asked
    first = plan.records[0] if plan.records else None
    text = getattr(first, "question", None) or merged_question(asked.query, asked.earlier.context)
    return replace(asked, query=text) if text != asked.query else asked

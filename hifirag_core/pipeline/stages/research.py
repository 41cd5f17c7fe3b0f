"""Looking again (beyond the paper; the research variants): does the evidence cover the question, and which
searches would find what is missing?"""


from __future__ import annotations

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    PageRecord,
    QueryPlanRecord,
    SectionDecisionRecord,
    SectionRecord,
    SufficiencyRecord,
)
from hifirag_core.types import (
    SourceSection,
    Sufficiency,
)


def check_sufficiency(question: Question, pages: StageOutput, sections: StageOutput, ranking: StageOutput,
                      rt: Runtime) -> StageOutput:
    """Whether every section kept so far (every round's) covers the question, and what is missing (beyond
    the paper; the ``research`` variants). The value is the ``Sufficiency`` the next round plans from."""
    kept = kept_sections(pages, sections, ranking)
    decision = rt.filter_model.check_sufficiency(question.query, kept)
    check = decision.value
    record = SufficiencyRecord(verdict=check.verdict, covered=list(check.covered), missing=list(check.missing),
                               sections=len(kept), method=decision.method, model=getattr(rt.filter_model, "model", None),
                               prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("sufficiency"),
                               status=decision.status, error=decision.error)
    return StageOutput(records=[record], calls=list(decision.calls), value=check, status=decision.status,
                       error=decision.error)


def plan_followup(question: Question, check: StageOutput, earlier: tuple[str, ...], rt: Runtime) -> StageOutput:
    """A follow-up round's searches, aimed at what the last check found missing, none searched before."""
    sufficiency = check.value
    missing = list(sufficiency.missing) if isinstance(sufficiency, Sufficiency) else [question.query]
    decision = rt.filter_model.plan_followup(question.query, missing, list(earlier),
                                             max_queries=rt.cfg.research.max_queries_per_round)
    queries = [q for q in decision.value if q.strip()]
    record = QueryPlanRecord(queries=queries, method=decision.method, status=decision.status, error=decision.error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("followup"))
    status = decision.status if queries or decision.status != OK else "no_new_queries"
    return StageOutput(records=[record], calls=list(decision.calls), value=queries, status=status,
                       error=decision.error)


def kept_sections(pages: StageOutput, sections: StageOutput, ranking: StageOutput) -> list[SourceSection]:
    """Every section the ranking kept, whole, in page order and then rank (what the evidence holds, before
    the writer's context bound or sentence selection)."""
    text_of = {s.section_id: s for s in sections.records if isinstance(s, SectionRecord) and s.ok}
    order = {p.url: p.order for p in pages.records if isinstance(p, PageRecord)}
    kept = sorted((d for d in ranking.records if isinstance(d, SectionDecisionRecord) and d.kept
                   and d.section_id in text_of), key=lambda d: (order.get(d.url, 0), d.rank or 0))
    return [SourceSection(d.section_id, tuple(text_of[d.section_id].heading_path), text_of[d.section_id].text or "",
                          d.score) for d in kept]

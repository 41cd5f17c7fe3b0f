"""Query plan (prompt A.1): the question rewritten into the searches that answer it."""


from __future__ import annotations

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    OK,
    QueryPlanRecord,
)
from hifirag_core.turns import ThreadContext


def plan_query(question: Question, rt: Runtime, thread: ThreadContext | None = None) -> StageOutput:
    """The search queries (A.1). A follow-up turn (``thread``: the turns before it) is first restated as a
    question that stands alone (``hifirag_core.pipeline.threads``), which the queries and every later stage read."""
    restated = rt.filter_model.restate(question.query, thread) if thread is not None else None
    asked = restated.value if restated is not None else question.query
    turn = {"question": asked, "restated_by": restated.method} if restated is not None else {}
    calls = list(restated.calls) if restated is not None else []
    cfg = rt.cfg.query_plan
    if not cfg.enabled or not rt.cfg.search.enabled:
        record = QueryPlanRecord(queries=[asked], method="raw", **turn)
        return StageOutput(records=[record], calls=calls, value=[asked])
    # a question not in English: search in its language (and in English where that helps); the question's
    # language is a function of its text, which keys this stage already
    detected = Steer(question, rt.cfg).detected
    language = detected.code if detected.code != "en" else None
    decision = rt.filter_model.plan_queries(asked, max_queries=cfg.max_queries, language=language)
    queries = [q for q in decision.value if q.strip()] or [asked]
    # a restatement that fell back (to the offline merge) says so, as a plan that fell back does
    status, error = next(((d.status, d.error) for d in (restated, decision) if d is not None and d.status != OK),
                         (OK, None))
    record = QueryPlanRecord(queries=queries, method=decision.method, status=status, error=error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("query_plan"), **turn)
    return StageOutput(records=[record], calls=[*calls, *decision.calls], value=queries)

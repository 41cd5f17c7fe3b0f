"""Query plan (prompt A.1): the question rewritten into the searches that answer it."""


from __future__ import annotations

from hifirag_core.pipeline.output import StageOutput
from hifirag_core.pipeline.question_steering import Steer
from hifirag_core.pipeline.runtime import Runtime
from hifirag_core.questions import Question
from hifirag_core.records import (
    QueryPlanRecord,
)


def plan_query(question: Question, rt: Runtime) -> StageOutput:
    cfg = rt.cfg.query_plan
    if not cfg.enabled or not rt.cfg.search.enabled:
        record = QueryPlanRecord(queries=[question.query], method="raw")
        return StageOutput(records=[record], value=[question.query])
    # a question not in English: search in its language (and in English where that helps); the question's
    # language is a function of its text, which keys this stage already
    detected = Steer(question, rt.cfg).detected
    language = detected.code if detected.code != "en" else None
    decision = rt.filter_model.plan_queries(question.query, max_queries=cfg.max_queries, language=language)
    queries = [q for q in decision.value if q.strip()] or [question.query]
    record = QueryPlanRecord(queries=queries, method=decision.method, status=decision.status, error=decision.error,
                             model=getattr(rt.filter_model, "model", None),
                             prompt_hash=getattr(rt.filter_model, "prompt_hashes", {}).get("query_plan"))
    return StageOutput(records=[record], calls=list(decision.calls), value=queries)

"""The follow-up plan's job (ours, beyond the paper; the research variants): searches for what is missing."""

from __future__ import annotations

from hifirag_core.evidence.sufficiency import followup_queries
from hifirag_core.llm.job import ModelJob, failed_status, object_schema
from hifirag_core.llm.parsing import parse_queries
from hifirag_core.llm.prompts import query_range
from hifirag_core.types import Decision


class FollowupPlanner(ModelJob):
    """Searches aimed at what the last check found missing, never an earlier query; an unusable reply falls
    back to the offline planner."""

    prompt_name = "followup"
    variables = frozenset({"question", "missing", "earlier", "query_range"})

    def plan(self, question: str, missing: list[str], earlier: list[str], *, max_queries: int) -> Decision[list[str]]:
        reply = self.ask(object_schema("queries", "string"), question=question,
                         missing="; ".join(missing) or "(nothing listed)", earlier="; ".join(earlier) or "(none)",
                         query_range=query_range(max_queries))
        seen = {" ".join(q.lower().split()) for q in earlier}
        if reply.text is not None:
            parsed = parse_queries(reply.text, max_queries=max_queries + len(earlier))
            if parsed.ok:
                fresh = [q for q in parsed.value if " ".join(q.lower().split()) not in seen][:max_queries]
                return Decision(fresh, method="llm", calls=[reply.call])
            status, error = "parse_error", parsed.error
        else:
            status, error = failed_status(reply), reply.call.error or "no reply"
        return Decision(followup_queries(question, missing, earlier, max_queries), method="llm+fallback:offline",
                        calls=[reply.call], status=status, error=error)
